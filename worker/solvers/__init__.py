"""The numba solvers. Importing the package puts Hinge's kernel-cache locator in front of numba's
(``core.compile_cache``): one cache folder wherever the code is installed, kernels stamped with their
module's sources and those of the modules it imports, so a change to a callee recompiles its callers."""

from pathlib import Path

from core.compile_cache import install

install(__name__, Path(__file__).resolve().parent)
