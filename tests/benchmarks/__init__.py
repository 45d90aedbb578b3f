"""Benchmarks, run on purpose (never collected by the test run).

Importing this package sets the environment a worker runs with, before numpy or numba are imported:
numba's fork-safe 'workqueue' threading layer, and BLAS libraries without thread pools of their own
(OpenBLAS's threads spin after each call and took a core from the solvers' threads).
"""

import os

os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
for _name in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # not OMP_NUM_THREADS: LIBSVM's binding uses OpenMP
    os.environ.setdefault(_name, "1")
