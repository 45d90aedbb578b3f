"""Drop numba's cached kernels of this package when any of its sources changed.

numba keys a cached kernel on the contents of its own source file only. A kernel that calls a kernel of
another module keeps that callee's machine code in its cache entry, so after an update that changes
only the callee's module (``smo_team.py``, say) the caller (``smo_cache.get_row``) would still run the
old callee: with a changed protocol between threads that gave NaN models in development. So the cached
kernels of ``worker/solvers`` are kept only as long as a fingerprint of all its sources is the one
stamped next to them; otherwise they are deleted (numba compiles them again, once) and the new
fingerprint is stamped. This runs when the package is imported (``worker/solvers/__init__.py``), before
any kernel is loaded; it costs a hash of about 400 KB of source. A fresh install or image compiles
everything anyway; this is for checkouts that are updated in place (``git pull`` then ``./dev serve``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

STAMP_NAME = "hinge-solvers-sources.sha256"


def sources_fingerprint(source_dir: Path) -> str:
    """SHA-256 over the names and contents of the package's Python sources, in name order."""
    digest = hashlib.sha256()
    for path in sorted(source_dir.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_dirs(source_dir: Path) -> list[Path]:
    """Where numba may keep this package's kernels: next to the sources, in NUMBA_CACHE_DIR, or in the
    user-wide cache (numba's own locators, in the order it tries them)."""
    dirs = [source_dir / "__pycache__"]
    try:
        from numba.core import config
        from numba.core.caching import _CacheLocator
        from numba.misc.appdirs import AppDirs

        subpath = _CacheLocator.get_suitable_cache_subpath(str(source_dir / "__init__.py"))
        user_dir = getattr(config, "CACHE_DIR", "")  # set from NUMBA_CACHE_DIR when numba is imported
        if user_dir:
            dirs.append(Path(user_dir) / subpath)
        dirs.append(Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / subpath)
    except Exception:  # pragma: no cover - a numba without these internals: the in-tree cache only
        pass
    return dirs


def drop_stale_kernel_caches(source_dir: Path, dirs: list[Path] | None = None) -> int:
    """Delete the cached kernels of the package at ``source_dir`` in every cache dir whose stamp is not the
    sources' fingerprint, then stamp it; returns how many files were deleted. Never raises for a cache dir
    that cannot be read or written (numba then compiles without caching there, as it would anyway)."""
    fingerprint = sources_fingerprint(source_dir)
    deleted = 0
    for directory in cache_dirs(source_dir) if dirs is None else dirs:
        stamp = directory / STAMP_NAME
        try:
            if not directory.is_dir() or (stamp.is_file() and stamp.read_text().strip() == fingerprint):
                continue
            for entry in directory.iterdir():
                if entry.suffix in (".nbi", ".nbc"):  # these dirs are this package's alone (numba's subpath)
                    entry.unlink(missing_ok=True)
                    deleted += 1
            stamp.write_text(fingerprint + "\n")
        except OSError:
            continue
    return deleted
