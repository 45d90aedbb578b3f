"""The kernel cache (core/compile_cache.py): stamped with a module's sources and its callees', found wherever
the code lives, filled once per machine under unit locks, seeded from an image's cache; and the solvers' own
cache: a second start compiles nothing."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.compile_cache import fingerprints_of
from tests.conftest import ROOT

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

SOLVER_PACKAGE_DIR = ROOT / "worker" / "solvers"

# A package of three kernel modules: `caller` calls `callee`'s kernel, `alone` imports nothing of it.
PACKAGE = {
    "callee.py": "from numba import njit\n\n@njit(cache=True)\ndef g(x):\n    return x + 1\n",
    "caller.py": "from numba import njit\nfrom kpkg.callee import g\n\n@njit(cache=True)\ndef f(x):\n    return g(x) * 2\n",
    "alone.py": "from numba import njit\n\n@njit(cache=True)\ndef h(x):\n    return x - 1\n",
    "units.py": textwrap.dedent(
        """
        import json, os, time
        from core.compile_cache import CompileUnits, CompileUnit

        def _record(name, dispatcher, value):
            with open(os.environ["KPKG_LOG"], "a") as out:
                out.write(json.dumps({"pid": os.getpid(), "unit": name, "misses": sum(dispatcher.stats.cache_misses.values()),
                                      "hits": sum(dispatcher.stats.cache_hits.values()), "value": value}) + "\\n")

        def warm_caller():
            if os.environ.get("KPKG_FAIL") == "caller":
                raise RuntimeError("caller cannot compile here")
            from kpkg.caller import f
            time.sleep(float(os.environ.get("KPKG_SLOW", "0")))
            _record("caller", f, f(1))

        def warm_alone():
            from kpkg.alone import h
            time.sleep(float(os.environ.get("KPKG_SLOW", "0")))
            _record("alone", h, h(1))

        KERNELS = CompileUnits((
            CompileUnit("caller", "kpkg", "caller", "kpkg.units:warm_caller", reference_s=1.0),
            CompileUnit("alone", "kpkg", "alone", "kpkg.units:warm_alone", reference_s=1.0),
        ))
        """
    ),
}
INIT = "from pathlib import Path\nfrom core.compile_cache import install\ninstall(__name__, Path(__file__).resolve().parent)\n"


def make_package(where: Path) -> Path:
    folder = where / "kpkg"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(INIT)
    for name, text in PACKAGE.items():
        (folder / name).write_text(text)
    return folder


def run(where: Path, cache: Path, code: str, log: Path, **env_extra) -> subprocess.Popen:
    env = dict(
        os.environ,
        PYTHONPATH=f"{where}{os.pathsep}{ROOT}",
        HINGE_KERNEL_CACHE_DIR=str(cache),
        KPKG_LOG=str(log),
        NUMBA_THREADING_LAYER="workqueue",
        **env_extra,
    )
    env.pop("NUMBA_CACHE_DIR", None)
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=where)


def records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


ENSURE_ALL = "from kpkg.units import KERNELS; KERNELS.ensure(['caller', 'alone'])"


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_the_cache_files_take_the_umask_as_numbas_own_do(tmp_path, umask, mode):
    """Every file of a built cache (numba's kernels, the units' markers, the import memo, the locks) has the mode the
    umask gives: a cache shared by processes of several users (a volume mounted in containers) reads everywhere
    under the usual 022; the markers and the memo were 0600 (mkstemp's) whatever the umask."""
    where = tmp_path / "src"
    make_package(where)
    cache = tmp_path / "cache"
    code = f"import os; os.umask({umask:#o}); " + ENSURE_ALL
    assert run(where, cache, code, tmp_path / "log").wait(120) == 0
    files = [path for path in cache.rglob("*") if path.is_file()]
    kinds = {path.suffix for path in files}
    assert {".nbi", ".nbc", ".json", ".lock"} <= kinds, kinds
    assert any(path.name == "imports.json" for path in files) and any(path.parent.name == "built" for path in files)
    wrong = {str(path.relative_to(cache)): oct(path.stat().st_mode & 0o777) for path in files}
    assert {name: m for name, m in wrong.items() if m != oct(mode)} == {}


def test_fingerprints_follow_imports_and_only_them(tmp_path):
    """Changing smo/team.py changes the fingerprint of every solver module that imports it, directly or
    not, and of nothing else: dcd, cpa, ocas keep theirs (so their cached kernels stay valid). Modules of
    subpackages are named relative to the package (``smo.team``)."""
    before = fingerprints_of(SOLVER_PACKAGE_DIR, "worker.solvers")
    copy = tmp_path / "solvers"
    shutil.copytree(SOLVER_PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "smo" / "team.py").write_text((copy / "smo" / "team.py").read_text() + "\n# a change\n")
    after = fingerprints_of(copy, "worker.solvers")
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"smo.team", "smo.cache", "smo.steps", "smo.run", "smo.solve"}
    assert "dcd" in before and "compile_cache" not in before, "every solver module and nothing else is fingerprinted"


def test_what_a_source_imports_is_remembered_by_its_content(tmp_path, monkeypatch):
    """The import graph behind the fingerprints is remembered in a memo file keyed by each source's content: the
    same fingerprints as a parse, a second process start parses nothing, a changed source is parsed again (and
    only it), and a memo that is damaged or of another format is ignored and rewritten."""
    from core import source_imports

    copy = tmp_path / "solvers"
    shutil.copytree(SOLVER_PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    memo = tmp_path / "cache" / "imports.json"
    parsed = fingerprints_of(copy, "worker.solvers")
    assert fingerprints_of(copy, "worker.solvers", memo) == parsed and memo.is_file()
    calls: list[str] = []
    real = source_imports.imported_names
    monkeypatch.setattr(source_imports, "imported_names", lambda *a: calls.append(a[1]) or real(*a))
    assert fingerprints_of(copy, "worker.solvers", memo) == parsed and calls == []
    team = copy / "smo" / "team.py"
    team.write_text(team.read_text() + "\nfrom worker.solvers import dcd  # a new import\n")
    changed = fingerprints_of(copy, "worker.solvers", memo)
    assert calls == ["smo.team"]
    monkeypatch.setattr(source_imports, "imported_names", real)
    assert changed == fingerprints_of(copy, "worker.solvers")  # as a parse of every source
    assert changed["smo.team"] != parsed["smo.team"] and changed["dcd"] == parsed["dcd"]
    for damaged in ("{not json", json.dumps({"format": 0, "imports": {}}), json.dumps([1, 2])):
        memo.write_text(damaged)
        assert fingerprints_of(copy, "worker.solvers", memo) == changed
        assert json.loads(memo.read_text())["format"] == source_imports.MEMO_FORMAT


def test_a_change_to_a_callee_recompiles_its_callers_and_nothing_else(tmp_path):
    folder = make_package(tmp_path / "src")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    for _ in range(2):
        assert run(tmp_path / "src", cache, ENSURE_ALL, log).wait(120) == 0
    first, second = records(log)[:2], records(log)[2:]
    assert all(r["misses"] == 1 for r in first), "a cold cache compiles"
    assert all(r["misses"] == 0 and r["hits"] == 1 for r in second), "the second start compiles nothing"
    (folder / "callee.py").write_text(PACKAGE["callee.py"].replace("x + 1", "x + 10"))
    log.unlink()
    assert run(tmp_path / "src", cache, ENSURE_ALL, log).wait(120) == 0
    by_unit = {r["unit"]: r for r in records(log)}
    assert by_unit["caller"]["misses"] == 1 and by_unit["caller"]["value"] == 22, "the caller runs the new callee"
    assert by_unit["alone"]["misses"] == 0, "a module that does not import the callee keeps its kernels"


def test_an_index_naming_a_type_the_code_no_longer_has_is_a_miss_not_a_crash(tmp_path):
    """An upgrade removed a type that a cached kernel's signature used: numba unpickles the old index before it
    looks at its stamp, and used to raise from every first call of the kernel (a builder that died, a service
    saying "compiling" forever, every job of the solver failing). The index now reads as empty: the kernel
    compiles again and its index is written anew."""
    import numba

    folder = make_package(tmp_path / "src")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    assert run(tmp_path / "src", cache, ENSURE_ALL, log).wait(120) == 0
    (index,) = (cache / "kpkg").glob("alone.h-*.nbi")
    # what pickle writes for an instance of a class, here one the package no longer defines
    vanished = b"ckpkg.alone\nTypeRemovedByAnUpgrade\n)\x81."
    index.write_bytes(pickle.dumps(numba.__version__) + vanished)
    (folder / "alone.py").write_text(PACKAGE["alone.py"].replace("x - 1", "x - 2"))  # the upgrade
    log.unlink()
    assert run(tmp_path / "src", cache, ENSURE_ALL, log).wait(120) == 0
    by_unit = {r["unit"]: r for r in records(log)}
    assert by_unit["alone"]["misses"] == 1 and by_unit["alone"]["value"] == -1, "compiled again, the new code"
    assert by_unit["caller"]["misses"] == 0, "the other units keep their kernels"
    log.unlink()
    assert run(tmp_path / "src", cache, ENSURE_ALL, log).wait(120) == 0
    assert [r["misses"] for r in records(log)] == [0, 0], "the index was written anew: the next start loads it"


def test_a_unit_that_fails_to_compile_leaves_the_builder_building_the_others(tmp_path):
    """The background builder met an error in one unit: it says which and builds the rest (it used to die there,
    leaving every later unit to the jobs)."""
    make_package(tmp_path / "src")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    code = "import logging; logging.basicConfig(); from kpkg.units import KERNELS; KERNELS.build_missing()"
    err = tmp_path / "stderr.txt"
    with err.open("w") as stderr:
        env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'src'}{os.pathsep}{ROOT}", HINGE_KERNEL_CACHE_DIR=str(cache))
        env.update(KPKG_LOG=str(log), KPKG_FAIL="caller", NUMBA_THREADING_LAYER="workqueue")
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path / "src", stderr=stderr, timeout=120)
    assert done.returncode == 0, err.read_text()
    assert "compiling caller failed" in err.read_text() and "caller cannot compile here" in err.read_text()
    assert [r["unit"] for r in records(log)] == ["alone"], "the unit after the failing one is built"
    assert sorted(p.name.split(".")[0] for p in (cache / "kpkg" / "built").iterdir()) == ["alone"]
    (failed,) = (cache / "kpkg" / "failed").iterdir()  # what the heartbeat reads (kernel_state's "failed")
    assert failed.name.startswith("caller.") and "caller cannot compile here" in json.loads(failed.read_text())["error"]
    log.unlink()
    env.pop("KPKG_FAIL")  # the cause gone
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path / "src", timeout=120)
    assert done.returncode == 0 and [r["unit"] for r in records(log)] == ["caller"]
    assert list((cache / "kpkg" / "failed").iterdir()) == [], "built: no longer said failed"


def test_the_cache_is_found_wherever_the_code_is_installed(tmp_path):
    """The same sources at another path (an image's build folder, then site-packages) use the same cache."""
    make_package(tmp_path / "build")
    make_package(tmp_path / "installed")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    assert run(tmp_path / "build", cache, ENSURE_ALL, log).wait(120) == 0
    assert run(tmp_path / "installed", cache, ENSURE_ALL, log).wait(120) == 0
    assert [r["misses"] for r in records(log)] == [1, 1, 0, 0]
    assert sorted(p.name.split(".")[0] for p in (cache / "kpkg" / "built").iterdir()) == ["alone", "caller"]


def test_processes_never_compile_the_same_unit_at_once(tmp_path):
    """Three processes want both units at the same time: each unit is compiled by exactly one of them, the
    others wait for it and load it from the cache."""
    make_package(tmp_path / "src")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    procs = [run(tmp_path / "src", cache, ENSURE_ALL, log, KPKG_SLOW="1.0") for _ in range(3)]
    assert [p.wait(120) for p in procs] == [0, 0, 0]
    seen = records(log)
    assert len(seen) == 6
    for unit in ("caller", "alone"):
        compiled = [r for r in seen if r["unit"] == unit and r["misses"] > 0]
        assert len(compiled) == 1, f"{unit} compiled {len(compiled)} times"


def test_builders_split_the_units_between_them(tmp_path):
    """Two builders on a cold cache: each takes a unit the other does not hold, so both compile, once each."""
    make_package(tmp_path / "src")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    code = "from kpkg.units import KERNELS; KERNELS.build_missing()"
    procs = [run(tmp_path / "src", cache, code, log, KPKG_SLOW="2.0") for _ in range(2)]
    assert [p.wait(120) for p in procs] == [0, 0]
    seen = records(log)
    assert sorted(r["unit"] for r in seen) == ["alone", "caller"] and all(r["misses"] == 1 for r in seen)
    assert len({r["pid"] for r in seen}) == 2, "the two builders worked at the same time, on different units"


def test_a_seed_cache_is_copied_in_and_used_as_it_is(tmp_path):
    """An image's cache (HINGE_KERNEL_SEED_DIR) fills an empty cache volume: nothing compiles there."""
    make_package(tmp_path / "src")
    seed, volume, log = tmp_path / "seed", tmp_path / "volume", tmp_path / "log.jsonl"
    assert run(tmp_path / "src", seed, ENSURE_ALL, log).wait(120) == 0
    log.unlink()
    code = "from kpkg.units import KERNELS; assert KERNELS.seed() > 0; KERNELS.ensure(['caller', 'alone'])"
    assert run(tmp_path / "src", volume, code, log, HINGE_KERNEL_SEED_DIR=str(seed)).wait(120) == 0
    assert [r["misses"] for r in records(log)] == [0, 0]
    code = "from kpkg.units import KERNELS; assert KERNELS.seed() == 0"  # already there: not copied again
    assert run(tmp_path / "src", volume, code, log, HINGE_KERNEL_SEED_DIR=str(seed)).wait(120) == 0


def test_another_cpu_target_compiles_into_the_same_cache_without_losing_the_first(tmp_path):
    """numba's machine code depends on the CPU: a cache built for one target (here the generic x86-64 one)
    is not taken for another, and both then live side by side in one cache."""
    make_package(tmp_path / "src")
    cache, log = tmp_path / "cache", tmp_path / "log.jsonl"
    generic = {"NUMBA_CPU_NAME": "generic"}
    for extra in (generic, {}, generic, {}):
        assert run(tmp_path / "src", cache, ENSURE_ALL, log, **extra).wait(120) == 0
    assert [r["misses"] for r in records(log)] == [1, 1, 1, 1, 0, 0, 0, 0]


def test_a_second_start_of_the_solvers_compiles_nothing(tmp_path):
    """Every solver's kernels, as a worker warms them: once built, a new process only loads them."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_THREADING_LAYER="workqueue")
    built = subprocess.run(
        [sys.executable, "-m", "service.cli", "compile", "--build", "--json"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert built.returncode == 0, built.stderr
    state = json.loads(built.stdout)
    assert all(unit["built"] for unit in state["units"].values())
    assert state["solvers_ready"] == ["dcd", "cpa", "ocas", "smo", "sampled_cuts"]
    code = textwrap.dedent(
        """
        import json, sys
        from numba.core.registry import CPUDispatcher
        from worker.runtime import warmup
        warmup.warm_up_all()
        misses = {}
        for name, module in list(sys.modules.items()):
            if name.startswith("worker.solvers."):
                for attr in vars(module).values():
                    if isinstance(attr, CPUDispatcher) and sum(attr.stats.cache_misses.values()):
                        misses[f"{name}.{attr.py_func.__name__}"] = dict(attr.stats.cache_misses)
        print(json.dumps({"misses": {k: str(v) for k, v in misses.items()}, "loaded": sorted(warmup.KERNELS.loaded)}))
        """
    )
    second = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout.strip().splitlines()[-1])
    assert result["misses"] == {}, "a kernel was compiled again"
    assert len(result["loaded"]) == 14  # the 9 shared units (dcd_formulations one of them) and the 5 solvers


def test_the_estimate_follows_how_fast_this_machine_compiles(tmp_path):
    """kernel_state (what the heartbeat says): solvers ready once all their units are built; the seconds left
    lay the units left out on the compiles that run at once, each taking its reference seconds times the
    slowdown measured on the units built since the start, those being compiled counted from when they began."""

    from worker.runtime.warmup import kernel_state

    def path(kind, name):
        return str(tmp_path / kind / f"{name}.json")

    plan = {
        "units": {
            name: {"marker": path("built", name), "building": path("building", name), "reference_s": ref}
            for name, ref in (("a", 4.0), ("b", 6.0), ("c", 20.0), ("d", 10.0))
        },
        "solvers": {"first": ["a"], "both": ["a", "b"], "big": ["c"], "last": ["d"]},
        "past_slowdown": 2.0,  # an earlier compile's, agreeing with this one's
    }
    (tmp_path / "built").mkdir()
    (tmp_path / "building").mkdir()
    since = time.time() - 30.0
    for name, seconds in (("a", 8.0), ("b", 12.0)):  # twice the reference seconds: slowdown 2
        Path(path("built", name)).write_text(json.dumps({"seconds": seconds, "built_at": since + 5}))
    Path(path("building", "c")).write_text(json.dumps({"started_at": time.time() - 10.0}))
    state = kernel_state(plan, cores=2, builders=2, since=since)
    assert state["ready"] == ["first", "both"] and state["left"] == ["big", "last"]
    assert state["done"] == {"a": 8.0, "b": 12.0}
    assert abs(state["eta_s"] - 30.0) < 1.0, state  # c: 40 s at slowdown 2, 10 done; d beside it: 20 s
    assert abs(kernel_state(plan, cores=1, builders=2, since=since)["eta_s"] - 50.0) < 1.0  # one lane: 30 + 20
    Path(path("building", "d")).write_text(json.dumps({"started_at": time.time()}))
    # two compiles running on one core (a worker compiling for its job beside a builder): two lanes
    assert abs(kernel_state(plan, cores=1, builders=1, since=since)["eta_s"] - 30.0) < 1.0
    Path(path("building", "d")).unlink()
    Path(path("building", "c")).unlink()
    Path(path("built", "c")).write_text(json.dumps({"seconds": 40.0, "built_at": since + 25}))
    assert abs(kernel_state(plan, cores=2, builders=2, since=since)["eta_s"] - 20.0) < 1.0  # d alone
    Path(path("built", "d")).write_text(json.dumps({"seconds": 20.0, "built_at": since + 29}))
    done = kernel_state(plan, cores=2, builders=2, since=since)
    assert done["eta_s"] == 0.0 and done["left"] == [] and done["failed"] == []


def test_a_solver_whose_default_formulation_is_built_is_partly_ready(tmp_path):
    """kernel_state's ``partly``: a solver left whose own units (the plan's ``own``: dcd's C-SVC) are built while its
    formulations' unit compiles; and solver_readiness (what /readyz and `hinge serve` read of the heartbeats) keeps it
    among the solvers compiling, partly."""
    from core.lifecycle import solver_readiness
    from worker.runtime.warmup import kernel_state

    def path(kind, name):
        return str(tmp_path / kind / f"{name}.json")

    plan = {
        "units": {
            name: {"marker": path("built", name), "building": path("building", name), "reference_s": 5.0}
            for name in ("common", "dcd", "dcd_formulations", "smo")
        },
        "solvers": {"dcd": ["common", "dcd", "dcd_formulations"], "smo": ["common", "smo"]},
        "own": {"dcd": ["common", "dcd"], "smo": ["common", "smo"]},
        "past_slowdown": None,
    }
    (tmp_path / "built").mkdir()
    since = time.time() - 10.0
    nothing = kernel_state(plan, cores=2, builders=2, since=since)
    assert nothing["left"] == ["dcd", "smo"] and nothing["partly"] == []
    for name in ("common", "dcd"):
        Path(path("built", name)).write_text(json.dumps({"seconds": 5.0, "built_at": since + 1}))
    state = kernel_state(plan, cores=2, builders=2, since=since)
    assert state["ready"] == [] and state["left"] == ["dcd", "smo"] and state["partly"] == ["dcd"]
    beat = {
        "ready": True,
        "solvers": state["ready"],
        "warming": {key: state[key] for key in ("done", "left", "partly")},
    }
    readiness = solver_readiness({"w1": beat, "w2": {"ready": True, "solvers": []}})
    assert readiness["left"] == ["dcd", "smo"] and readiness["partly"] == ["dcd"] and readiness["ready"] == []
    # smo built on another machine while this one compiles it: compiling, not partly (it has no formulations)
    readiness = solver_readiness({"w1": beat, "w2": {"ready": True, "solvers": ["smo"]}})
    assert readiness["left"] == ["dcd", "smo"] and readiness["partly"] == ["dcd"]
    Path(path("built", "dcd_formulations")).write_text(json.dumps({"seconds": 5.0, "built_at": since + 2}))
    done = kernel_state(plan, cores=2, builders=2, since=since)
    assert done["ready"] == ["dcd"] and done["left"] == ["smo"] and done["partly"] == []


def test_a_small_unit_compiled_slowly_does_not_make_the_estimate_jump(tmp_path):
    """The slowdown of the first units measured is weighed against the prior (an earlier compile's on this machine):
    a 0.5 s unit compiled in 3 s (6x, while every process started) moves it little; a large unit measured at 2x
    moves it most of the way."""

    from worker.runtime.warmup import PRIOR_REFERENCE_S, kernel_state

    def path(kind, name):
        return str(tmp_path / kind / f"{name}.json")

    plan = {
        "units": {
            name: {"marker": path("built", name), "building": path("building", name), "reference_s": ref}
            for name, ref in (("small", 0.5), ("large", 40.0), ("rest", 100.0))
        },
        "solvers": {"one": ["small", "large"], "two": ["rest"]},
        "past_slowdown": 1.0,
    }
    (tmp_path / "built").mkdir()
    (tmp_path / "building").mkdir()
    since = time.time() - 60.0
    assert abs(kernel_state(plan, cores=1, builders=1, since=since)["eta_s"] - 140.5) < 0.5  # the prior alone
    Path(path("built", "small")).write_text(json.dumps({"seconds": 3.0, "built_at": since + 3}))
    slowdown = (3.0 + PRIOR_REFERENCE_S) / (0.5 + PRIOR_REFERENCE_S)
    assert slowdown < 1.15 and abs(kernel_state(plan, 1, 1, since)["eta_s"] - 140.0 * slowdown) < 0.5
    Path(path("built", "large")).write_text(json.dumps({"seconds": 80.0, "built_at": since + 50}))
    slowdown = (83.0 + PRIOR_REFERENCE_S) / (40.5 + PRIOR_REFERENCE_S)
    assert slowdown > 1.65 and abs(kernel_state(plan, 1, 1, since)["eta_s"] - 100.0 * slowdown) < 0.5


def test_a_unit_a_builder_failed_to_compile_is_said_failed_not_compiling(tmp_path):
    """kernel_state: a solver one of whose units a builder failed to compile (its failed marker, for this code) is
    in ``failed``, neither ``left`` nor in the estimate, until someone compiles it again (its building marker: left
    again) or it is built."""

    from worker.runtime.warmup import kernel_state

    def path(kind, name):
        return str(tmp_path / kind / f"{name}.json")

    units = (("a", 4.0), ("s", 30.0), ("t", 5.0))
    plan = {
        "units": {
            name: {
                "marker": path("built", name),
                "building": path("building", name),
                "failed": path("failed", name),
                "reference_s": ref,
            }
            for name, ref in units
        },
        "solvers": {"first": ["a"], "smo": ["a", "s"], "other": ["t"]},
        "past_slowdown": 1.0,
    }
    for kind in ("built", "building", "failed"):
        (tmp_path / kind).mkdir()
    Path(path("built", "a")).write_text(json.dumps({"seconds": 4.0, "built_at": 0.0}))
    Path(path("failed", "s")).write_text(json.dumps({"unit": "s", "error": "AttributeError('gone')"}))
    state = kernel_state(plan, cores=1, builders=1, since=time.time())
    assert state["ready"] == ["first"] and state["failed"] == ["smo"] and state["left"] == ["other"], state
    assert abs(state["eta_s"] - 5.0) < 0.5, "only t is still to compile"
    Path(path("building", "s")).write_text(json.dumps({"started_at": time.time()}))  # a job compiles it again
    again = kernel_state(plan, cores=1, builders=1, since=time.time())
    assert again["failed"] == [] and again["left"] == ["smo", "other"], again
    Path(path("building", "s")).unlink()
    Path(path("built", "s")).write_text(json.dumps({"seconds": 30.0, "built_at": 0.0}))
    assert kernel_state(plan, cores=1, builders=1, since=time.time())["failed"] == []
