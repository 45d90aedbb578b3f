"""A sixth solver that exists only in the tests (tests/test_toy_solver.py): its spec and params here
(imported by the API and the workers through HINGE_SOLVER_PLUGINS, so numba-free), its solve function in
``solve.py`` (imported by the workers only)."""
