"""The numba kernel cache of a machine: where it is, when a cached kernel is still valid, who compiles it.

Hinge's kernels (``worker/solvers``, and the upload parser in ``service/ingest``) are ``@njit(cache=True)``
functions. numba's own cache misses three things a service needs, so this module adds them:

* **One place, wherever the code is installed.** numba files a kernel under a hash of its source
  folder's path, so a cache built from ``/app/worker/solvers`` is not found by the same code installed in
  ``site-packages`` (what a Docker build did). Here a package's kernels live in ``<root>/<package>``:
  ``HINGE_KERNEL_CACHE_DIR``, else ``NUMBA_CACHE_DIR``, else ``__pycache__/hinge-kernels`` next to the
  sources when it is writable (a checkout: ``./dev serve``, the tests), else ``~/.cache/hinge/kernels``.
* **Valid exactly as long as the code is.** numba keys a cached kernel on its own file's contents. A
  kernel that calls a kernel of another module carries that callee's machine code, so a change to the
  callee alone would leave the caller running the old callee. Here each module's cache is stamped with a
  fingerprint of its source *and of every module of the package it imports, transitively*: changing
  ``smo/team.py`` recompiles the smo modules that import it, and nothing else. Nothing is ever deleted: a
  stale entry is simply not used (numba overwrites it when it compiles again).
* **Compiled once per machine.** Kernels are compiled in *units* (a module's ``warm_up``, the same every
  time), each under an exclusive file lock (``flock``) in the cache folder, so processes of one machine,
  containers sharing the cache volume included, never compile the same unit at the same time: one
  compiles, the others wait for it and then load the result in milliseconds, or take another unit. A unit
  that was compiled leaves a *marker* whose name holds the unit's fingerprint and the compile target
  (numba's version, the CPU name and features numba compiles for), so any process can tell without numba
  which units this machine has ready.

``HINGE_KERNEL_SEED_DIR`` names a read-only cache built elsewhere with the same layout (a Docker image
builds its kernels there). When it holds valid units that the cache lacks, they are copied in once, so a
new container on an existing cache volume starts from the image's kernels, not from a compile.

numba is imported only by ``install`` and ``target_key``: the API process may import this module
without loading numba.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib
import json
import logging
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from core.numba_index import read_unreadable_indexes_as_empty
from core.source_imports import MEMO_FORMAT, sibling_imports

log = logging.getLogger("hinge.kernels")

CPU_ENV = "HINGE_KERNEL_CPU"
"""Environment variable: ``host`` (default: kernels for this machine's CPU) or ``generic`` (any x86-64; numba's
``NUMBA_CPU_NAME=generic``, set here before numba is imported: a portable image, at a cost in speed)."""
if os.environ.get(CPU_ENV, "host").strip().lower() == "generic":
    os.environ.setdefault("NUMBA_CPU_NAME", "generic")

CACHE_DIR_ENV = "HINGE_KERNEL_CACHE_DIR"
"""Environment variable: the folder holding every package's kernel cache (one per machine or volume)."""
SEED_DIR_ENV = "HINGE_KERNEL_SEED_DIR"
"""Environment variable: a read-only kernel cache (same layout) whose valid units are copied in at start."""
IN_TREE_NAME = "hinge-kernels"
"""The cache's folder inside a writable ``__pycache__`` next to the sources (a checkout)."""

_packages: dict[str, Path] = {}
"""Registered packages: dotted name -> folder of their sources."""


# -- where ---------------------------------------------------------------------------------------


def register(package: str, source_dir: Path | str) -> None:
    """Declare that ``package`` (dotted name) has cacheable kernels in ``source_dir``."""
    _packages[package] = Path(source_dir).resolve()


def registered(package: str) -> Path:
    """The source folder of a registered package (KeyError names the package)."""
    try:
        return _packages[package]
    except KeyError:
        raise KeyError(
            f"package {package!r} has no registered kernels; known: {', '.join(sorted(_packages))}"
        ) from None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


@functools.cache
def package_cache_dir(package: str) -> Path:
    """The folder of ``package``'s kernels (created; see the module docstring for the order tried)."""
    root = os.environ.get(CACHE_DIR_ENV) or os.environ.get("NUMBA_CACHE_DIR")
    if root:
        return Path(root) / package
    in_tree = registered(package) / "__pycache__" / IN_TREE_NAME
    if _writable(in_tree):
        return in_tree
    return Path.home() / ".cache" / "hinge" / "kernels" / package


def seed_dir(package: str) -> Path | None:
    """The seed cache of ``package`` (``HINGE_KERNEL_SEED_DIR``), if one is set and differs from the cache."""
    root = os.environ.get(SEED_DIR_ENV)
    if not root:
        return None
    seed = Path(root) / package
    return seed if seed.resolve() != package_cache_dir(package).resolve() else None


# -- when a kernel is valid ------------------------------------------------------------------------


@functools.cache
def module_fingerprints(package: str) -> dict[str, str]:
    """Module name -> fingerprint, for a registered package (``fingerprints_of`` its folder; what each source
    imports remembered beside the package's kernels, ``core.source_imports``)."""
    return fingerprints_of(registered(package), package, package_cache_dir(package) / "imports.json")


def _module_names(folder: Path) -> dict[str, Path]:
    """Module name relative to the package -> source file, for every module under ``folder``, subpackages
    included (``dcd``, ``smo.cache``; a subpackage's ``__init__`` under the subpackage's name, the package's
    own ``__init__`` left out: it has no kernels)."""
    names = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if parts and "__pycache__" not in parts:
            names[".".join(parts)] = path
    return names


def fingerprints_of(folder: Path, package: str, memo: Path | None = None) -> dict[str, str]:
    """Module name -> SHA-256 over its source and the sources of every module of the package it imports,
    transitively, for the modules in ``folder`` (the package ``package``; see ``_module_names``); ``memo``: the
    file remembering what each source imports (``core.source_imports``)."""
    sources = {name: path.read_bytes() for name, path in _module_names(folder).items()}
    record = read_marker(memo) if memo is not None else None
    remembered = record.get("imports") if isinstance(record, dict) and record.get("format") == MEMO_FORMAT else None
    remembered = remembered if isinstance(remembered, dict) else {}  # absent, damaged or of another format
    imports, current = sibling_imports(package, sources, remembered)
    if memo is not None and current != remembered:  # only the current sources' entries: the file does not grow
        with contextlib.suppress(OSError):  # a cache folder it cannot write only costs the parse next time
            _write_atomically(memo, json.dumps({"format": MEMO_FORMAT, "imports": current}, sort_keys=True))
    fingerprints = {}
    for name in sources:
        closure, todo = {name}, [name]
        while todo:
            for other in imports[todo.pop()] - closure:
                closure.add(other)
                todo.append(other)
        digest = hashlib.sha256()
        for member in sorted(closure):
            digest.update(member.encode() + b"\0" + sources[member] + b"\0")
        fingerprints[name] = digest.hexdigest()
    return fingerprints


def _package_of(py_file: str) -> tuple[str, str] | None:
    """(package, module relative to it) of a source file of a registered package, else None."""
    path = Path(os.path.realpath(py_file))
    for package, folder in _packages.items():
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return package, ".".join(parts)
    return None


@functools.lru_cache(maxsize=1)
def _locator_class():
    from numba.core import caching

    class HingeKernelLocator(caching._CacheLocator):
        """numba cache locator for the registered packages: path-independent folder, fingerprint stamps."""

        def __init__(self, py_func, py_file: str, package: str, module: str):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            # a subpackage's kernels in a folder of their own: numba names cache files after the source
            # file's stem, which modules of two subpackages may share (kernels.py, smo/kernels.py)
            self._cache_path = str(package_cache_dir(package).joinpath(*module.split(".")[:-1]))
            self._stamp = ("hinge-fingerprint", module_fingerprints(package)[module])

        def get_cache_path(self) -> str:
            return self._cache_path

        def get_source_stamp(self):
            return self._stamp

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            found = _package_of(py_file)
            if found is None or found[1] not in module_fingerprints(found[0]):
                return None  # not ours: numba's own locators decide
            locator = cls(py_func, py_file, *found)
            try:
                locator.ensure_cache_path()
            except OSError:
                return None
            return locator

    return HingeKernelLocator


def install(package: str, source_dir: Path | str) -> None:
    """Register ``package`` and put Hinge's locator first in numba's list (call before its kernels are defined)."""
    register(package, source_dir)
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # type: ignore[attr-defined]  # older numba
    locator = _locator_class()
    if locator not in impl._locator_classes:
        impl._locator_classes.insert(0, locator)
    read_unreadable_indexes_as_empty(caching)


@functools.lru_cache(maxsize=1)
def target_key() -> str:
    """What numba's machine code depends on besides the source: numba's and Python's versions and the
    CPU target (name and features; ``NUMBA_CPU_NAME=generic`` gives a target any x86-64 runs)."""
    import numba
    from numba.core.registry import cpu_target

    magic = cpu_target.target_context.codegen().magic_tuple()
    if os.environ.get(CPU_ENV, "host").strip().lower() == "generic" and magic[1] != "generic":
        raise RuntimeError(f"{CPU_ENV}=generic, but numba was imported before core.compile_cache: CPU {magic[1]}")
    return json.dumps([numba.__version__, list(sys.version_info[:2]), [str(part) for part in magic]])


# -- units: what is compiled together, under one lock ---------------------------------------------


@dataclass(frozen=True)
class CompileUnit:
    """Kernels compiled together by one ``warm_up`` call, under one lock, with one marker once built."""

    name: str
    """Short name, unique in its package (``dcd``, ``cut_store``)."""
    package: str
    """The registered package whose cache holds the unit (``worker.solvers``)."""
    module: str
    """The module whose fingerprint (its source and its siblings', transitively) decides the unit's validity."""
    warm_up: str
    """``module.path:function`` that compiles (or loads) every kernel of the unit on tiny inputs."""
    requires: tuple[str, ...] = ()
    """Units whose kernels this unit's warm-up also calls: built first, so no two processes compile them."""
    reference_s: float = 1.0
    """Cold compile seconds on a quiet reference machine (2 cores): the estimate before anything is measured."""

    def _import(self) -> None:
        """Import the warm-up's module, which registers the package (and loads numba)."""
        importlib.import_module(self.warm_up.split(":")[0])

    def fingerprint(self) -> str:
        """The unit's fingerprint for the current sources and compile target."""
        self._import()
        text = "\0".join((self.name, module_fingerprints(self.package)[self.module], target_key()))
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def cache_dir(self) -> Path:
        """The cache folder of the unit's package."""
        self._import()
        return package_cache_dir(self.package)

    def marker(self, fingerprint: str | None = None) -> Path:
        """The file that says this unit is built in the cache (for ``fingerprint``, default the current one)."""
        return self.cache_dir() / "built" / f"{self.name}.{fingerprint or self.fingerprint()}.json"

    def measured_s(self) -> float | None:
        """The compile seconds this machine last measured for the unit, in any version of the code (markers
        of earlier versions stay), or None when it never compiled it."""
        records = [read_marker(path) for path in (self.cache_dir() / "built").glob(f"{self.name}.*.json")]
        latest = max((r for r in records if r and r.get("seconds")), key=lambda r: r.get("built_at", 0), default=None)
        return float(latest["seconds"]) if latest else None

    def failed_path(self, fingerprint: str | None = None) -> Path:
        """The file that says a builder failed to compile this code of the unit, and why (gone once it is built)."""
        return self.cache_dir() / "failed" / f"{self.name}.{fingerprint or self.fingerprint()}.json"

    def building_path(self) -> Path:
        """The file that says since when a process compiles the unit (present only while it does)."""
        return self.cache_dir() / "building" / f"{self.name}.json"

    def lock_path(self) -> Path:
        """The unit's lock file in the cache folder."""
        return self.cache_dir() / "locks" / f"{self.name}.lock"

    def run_warm_up(self) -> None:
        """Call the unit's warm-up function in this process."""
        module_name, function = self.warm_up.split(":")
        getattr(importlib.import_module(module_name), function)()


def read_marker(path: Path | str) -> dict | None:
    """A marker's record ({unit, seconds, built_at, host}; or another JSON file of the cache's), or None when it is
    absent or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new file in ``path``'s folder to be renamed over it: (open descriptor, name). Made with the umask's mode as
    numba's own files and the locks are (mkstemp's 0600 kept a marker from processes of another user sharing the
    cache, a volume mounted in containers of different users)."""
    while True:
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temp_beside(path)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def file_lock(path: Path, *, wait: bool = True, should_stop: Callable[[], bool] | None = None) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` inside the block; yields False when it was not taken (held
    elsewhere and ``wait`` is False, or ``should_stop()`` turned true while waiting). The kernel drops it
    if the holder dies, so a killed compiler never blocks the others."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait or (should_stop is not None and should_stop()):
                    yield False
                    return
                time.sleep(0.1)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class UnitsStopped(Exception):
    """Waiting for another process's compile was given up (``should_stop`` turned true)."""


@dataclass
class CompileUnits:
    """A set of kernel units, in the order they are worth building, and what this process has loaded."""

    units: tuple[CompileUnit, ...]
    loaded: dict[str, float] = field(default_factory=dict)
    """Units warm in this process -> seconds it took here (a compile, or a load from the cache)."""

    def __post_init__(self) -> None:
        self.by_name = {unit.name: unit for unit in self.units}

    def unit(self, name: str) -> CompileUnit:
        """The unit called ``name`` (KeyError names the known ones)."""
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f"unknown kernel unit {name!r}; known: {', '.join(self.by_name)}") from None

    def closure(self, names: list[str] | tuple[str, ...]) -> list[CompileUnit]:
        """The named units with everything they require, requirements first."""
        order: list[CompileUnit] = []

        def visit(name: str) -> None:
            unit = self.unit(name)
            if unit in order:
                return
            for required in unit.requires:
                visit(required)
            order.append(unit)

        for name in names:
            visit(name)
        return order

    def built(self, unit: CompileUnit) -> bool:
        """Whether this machine's cache holds the unit for the current code and target."""
        return unit.marker().is_file()

    def missing(self) -> list[CompileUnit]:
        """Units not yet built in the cache, in build order."""
        return [unit for unit in self.units if not self.built(unit)]

    def ensure(
        self,
        names: list[str] | tuple[str, ...],
        *,
        should_stop: Callable[[], bool] | None = None,
        on_wait: Callable[[CompileUnit], None] | None = None,
    ) -> dict[str, float]:
        """Make the named units (and what they require) warm in this process; returns {unit: seconds} of
        those compiled here. Units are taken as their locks allow: one that another process is compiling
        is left for later while this process compiles (or loads) the others it needs, then waited for
        (``on_wait(unit)`` is called once per unit waited for) and loaded from the cache. Raises
        UnitsStopped when ``should_stop()`` turns true while waiting."""
        compiled: dict[str, float] = {}
        todo = [unit for unit in self.closure(names) if unit.name not in self.loaded]
        announced: set[str] = set()
        while todo:
            for unit in todo:
                if not all(name in self.loaded for name in unit.requires):
                    continue
                with file_lock(unit.lock_path(), wait=False) as free:
                    if free:
                        compiled.update(self._warm(unit))
                        todo.remove(unit)
                        break
            else:  # every unit left is held elsewhere (or waits for one that is): wait for the first
                unit = next(u for u in todo if all(name in self.loaded for name in u.requires))
                if on_wait is not None and unit.name not in announced:
                    announced.add(unit.name)
                    on_wait(unit)
                with file_lock(unit.lock_path(), should_stop=should_stop) as taken:
                    if not taken:
                        raise UnitsStopped(f"stopped while waiting for the kernels of {unit.name}")
                    compiled.update(self._warm(unit))
                    todo.remove(unit)
        return compiled

    def _warm(self, unit: CompileUnit) -> dict[str, float]:
        """Warm one unit while holding its lock: a load when its marker exists, else a compile that writes it."""
        fingerprint = unit.fingerprint()
        was_built = unit.marker(fingerprint).is_file()
        building = unit.building_path()
        if not was_built:  # says since when this unit compiles (for estimates), until it is built
            _write_atomically(building, json.dumps({"unit": unit.name, "started_at": time.time()}) + "\n")
        start = time.perf_counter()
        try:
            unit.run_warm_up()
        finally:
            if not was_built:
                building.unlink(missing_ok=True)
        seconds = time.perf_counter() - start
        self.loaded[unit.name] = seconds
        if was_built:
            return {}
        record = {"unit": unit.name, "seconds": round(seconds, 2), "built_at": time.time(), "host": os.uname().nodename}
        _write_atomically(unit.marker(fingerprint), json.dumps(record) + "\n")
        unit.failed_path(fingerprint).unlink(missing_ok=True)
        return {unit.name: seconds}

    def build_missing(
        self,
        *,
        should_stop: Callable[[], bool] | None = None,
        on_built: Callable[[CompileUnit, float], None] | None = None,
    ) -> None:
        """Compile every unit the cache lacks, sharing the work with other processes doing the same: take the
        first unit, in order, that nobody holds and whose requirements are built; when every one left is
        held elsewhere, wait. Returns when the cache holds every unit (or ``should_stop()``). A unit whose
        compilation fails is logged with its error and left (with the units that require it) for the processes
        that need it, which meet the error themselves: the others are still built."""
        failed: set[str] = set()
        while True:
            pending = [unit for unit in self.missing() if unit.name not in failed]
            if not pending or (should_stop is not None and should_stop()):
                return
            took = False
            for unit in pending:
                if failed.intersection(unit.requires):
                    failed.add(unit.name)
                    took = True
                    break
                if not all(self.built(self.unit(name)) for name in unit.requires):
                    continue
                with file_lock(unit.lock_path(), wait=False) as free:
                    if not free:
                        continue
                    took = True
                    if not self.built(unit):
                        try:
                            warmed = self._warm(unit)
                        except Exception as error:
                            log.exception("compiling %s failed; the builder goes on with the other units", unit.name)
                            failed.add(unit.name)
                            why = {"unit": unit.name, "error": repr(error)[:500], "failed_at": time.time()}
                            with contextlib.suppress(OSError):
                                _write_atomically(unit.failed_path(), json.dumps(why) + "\n")
                            break
                        for seconds in warmed.values():
                            if on_built is not None:
                                on_built(unit, seconds)
                break
            if not took:
                time.sleep(0.2)

    def seed(self) -> int:
        """Copy the seed cache's packages in (``HINGE_KERNEL_SEED_DIR``) when it holds a valid unit that
        the cache lacks; returns the number of files copied. Data files first, then indexes, then markers,
        each by an atomic rename: a process loading kernels meanwhile sees either the old or the new file."""
        copied = 0
        for package in sorted({unit.package for unit in self.units}):
            units = [unit for unit in self.units if unit.package == package]
            units[0].cache_dir()  # registers the package
            source = seed_dir(package)
            if source is None or not source.is_dir():
                continue
            wanted = [
                unit for unit in units if not self.built(unit) and (source / "built" / unit.marker().name).is_file()
            ]
            if not wanted:
                continue
            target = package_cache_dir(package)
            with file_lock(target / "locks" / "seed.lock"):
                if all(self.built(unit) for unit in wanted):
                    continue
                files = (  # subpackages' kernels are in subfolders (see the locator)
                    sorted(source.rglob("*.nbc")) + sorted(source.rglob("*.nbi")) + sorted(source.glob("built/*.json"))
                )
                for path in files:
                    destination = target / path.relative_to(source)
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    fd, tmp = _temp_beside(destination)
                    os.close(fd)
                    shutil.copyfile(path, tmp)
                    os.replace(tmp, destination)
                    copied += 1
        return copied

    def status(self) -> dict[str, dict]:
        """Unit -> {built, seconds (of its compile, when built)} for this machine's cache."""
        out = {}
        for unit in self.units:
            record = read_marker(unit.marker()) if self.built(unit) else None
            out[unit.name] = {"built": record is not None, "seconds": (record or {}).get("seconds")}
        return out
