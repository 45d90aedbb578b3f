"""RQ job functions, the training dispatcher and the numba solvers (worker/solvers)."""
