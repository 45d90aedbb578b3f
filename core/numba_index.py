"""numba's cache index, read the way a service needs: an index that cannot be unpickled is a miss, not an error.
Used by ``core.compile_cache.install`` (which hands it numba's caching module: this module imports nothing of numba)."""

from __future__ import annotations

import logging
import pickle

log = logging.getLogger("hinge.kernels")

UNREADABLE_INDEX_ERRORS = (AttributeError, ImportError, EOFError, TypeError, ValueError, pickle.UnpicklingError)
"""What unpickling an index written by other code raises: a type of its kernels' signatures that this code no longer
has (a class renamed or removed), a truncated file."""


def read_unreadable_indexes_as_empty(caching) -> None:
    """Make numba read a cache index it cannot unpickle as an empty one (a miss: the kernel compiles again and its
    index is written anew) instead of raising from the first call of the kernel.

    numba unpickles an index's overloads before it compares the index's source stamp, so an index left by an older
    version of a module fails to load when a type in one of its signatures is gone, however stale the stamp says
    it is: every process using that kernel (the builder, every job of its solver) would fail until someone deleted
    the file by hand."""
    cls = caching.IndexDataCacheFile
    if getattr(cls._load_index, "reads_unreadable_as_empty", False):
        return
    load_index = cls._load_index

    def load_index_or_nothing(self):
        try:
            return load_index(self)
        except UNREADABLE_INDEX_ERRORS as error:
            log.warning("kernel cache index %s unreadable (%r): compiling its kernel again", self._index_path, error)
            return {}

    load_index_or_nothing.reads_unreadable_as_empty = True  # type: ignore[attr-defined]
    cls._load_index = load_index_or_nothing
