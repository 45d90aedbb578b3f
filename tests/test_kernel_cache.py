"""Cached numba kernels of worker/solvers are dropped when any of its sources changes (numba's own cache
key is the kernel's file alone, not its callees')."""

from __future__ import annotations

from pathlib import Path

from worker.solvers.kernel_cache import STAMP_NAME, cache_dirs, drop_stale_kernel_caches, sources_fingerprint


def _package(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "solvers"
    source.mkdir()
    (source / "caller.py").write_text("def f(): return g()\n")
    (source / "callee.py").write_text("def g(): return 1\n")
    cache = source / "__pycache__"
    cache.mkdir()
    return source, cache


def _cached(cache: Path) -> list[str]:
    for name in ("caller.f-1.py311.nbi", "caller.f-1.py311.1.nbc", "callee.g-1.py311.nbi"):
        (cache / name).write_bytes(b"kernel")
    return sorted(p.name for p in cache.iterdir() if p.suffix in (".nbi", ".nbc"))


def test_kernels_go_when_a_source_changes_and_stay_while_none_does(tmp_path):
    source, cache = _package(tmp_path)
    (cache / "caller.cpython-311.pyc").write_bytes(b"bytecode")
    _cached(cache)
    assert drop_stale_kernel_caches(source, [cache]) == 3, "no stamp yet: nothing cached can be trusted"
    assert (cache / STAMP_NAME).read_text().strip() == sources_fingerprint(source)
    assert (cache / "caller.cpython-311.pyc").exists(), "only numba's files are touched"

    kept = _cached(cache)
    assert drop_stale_kernel_caches(source, [cache]) == 0
    assert sorted(p.name for p in cache.iterdir() if p.suffix in (".nbi", ".nbc")) == kept

    (source / "callee.py").write_text("def g(): return 2\n")  # the caller's file did not change
    assert drop_stale_kernel_caches(source, [cache]) == 3
    assert not any(p.suffix in (".nbi", ".nbc") for p in cache.iterdir())


def test_missing_or_unwritable_cache_dirs_are_skipped(tmp_path):
    source, cache = _package(tmp_path)
    assert drop_stale_kernel_caches(source, [tmp_path / "absent", tmp_path / "solvers" / "caller.py"]) == 0


def test_the_package_looks_where_numba_caches(monkeypatch, tmp_path):
    from numba.core import config

    monkeypatch.setattr(config, "CACHE_DIR", str(tmp_path / "numba-cache"))
    source = Path(__file__).resolve().parents[1] / "worker" / "solvers"
    dirs = cache_dirs(source)
    assert dirs[0] == source / "__pycache__"
    assert any(str(d).startswith(str(tmp_path / "numba-cache") + "/solvers_") for d in dirs)
