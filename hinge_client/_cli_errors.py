"""How `hingectl` fails: an error to report on stderr with an exit code, made from what the client raised.

The command line talks to the service through ``hinge_client.Client`` (it has no HTTP of its own); this
module turns the client's ``HingeError`` (the service's error answer) and httpx's transport errors into
``CliError`` with the exit codes documented in ``hinge_client.cli``.
"""

from __future__ import annotations

import httpx

from hinge_client.errors import HingeError


class CliError(Exception):
    """A failure to report on stderr with an exit code (see hinge_client.cli)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code
        self.status: int | None = None  # the HTTP status, when the service answered
        self.code: str | None = None  # the service's error code, when it answered one

    def reworded(self, message: str) -> CliError:
        """The same error (exit code, status, code) with another message."""
        error = CliError(message, self.exit_code)
        error.status, error.code = self.status, self.code
        return error


# exit codes (documented in hinge_client.cli)
EXIT_OK, EXIT_JOB_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND, EXIT_AUTH, EXIT_REFUSED, EXIT_SERVER = range(8)
EXIT_WARNINGS = 8  # --strict: the watched job succeeded, and its model carries warnings


def exit_code_for(status: int) -> int:
    """The exit code of an HTTP error status."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (401, 403):
        return EXIT_AUTH
    if status >= 500:
        return EXIT_SERVER
    return EXIT_REFUSED


def api_error(exc: HingeError) -> CliError:
    """The service's error answer as a CliError (message, code, status)."""
    message = exc.message or "(no message)"
    error = CliError(f"{message} (HTTP {exc.status} {exc.code})", exit_code_for(exc.status))
    error.status, error.code = exc.status, exc.code
    return error


def unreachable(url: str, exc: httpx.TransportError) -> CliError:
    """A service that did not answer, as a CliError."""
    return CliError(
        f"cannot reach {url} ({type(exc).__name__}: {exc}); is the service running? (--url or HINGE_URL)",
        EXIT_UNREACHABLE,
    )


def cli_error(exc: HingeError | httpx.TransportError, url: str) -> CliError:
    """What the client raised (an error answer, or no answer from ``url``) as a CliError."""
    return api_error(exc) if isinstance(exc, HingeError) else unreachable(url, exc)
