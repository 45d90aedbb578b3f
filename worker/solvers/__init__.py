"""The numba solvers. Importing the package first drops cached kernels that its changed sources made stale
(``kernel_cache``: numba's cache does not see changes in a kernel's callees)."""

from pathlib import Path

from worker.solvers.kernel_cache import drop_stale_kernel_caches

drop_stale_kernel_caches(Path(__file__).resolve().parent)
