"""Hinge's clients: the `hingectl` command line (hinge_client.cli)."""
