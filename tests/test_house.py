"""The house rules a reader relies on (issue 35), checked on the sources as they are committed.

- No module over ``MAX_LINES`` lines, in the packages or the tests: a module a reader can hold in mind.
- A model's and a job's fields are read as attributes of their typed records, never as ``meta["..."]`` or
  ``job["..."]`` strings in the service or the workers.
- A solver with a package of its own is named outside it only where it is registered or offered
  (``SOLVER_NAMED_AT_MOST``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "service", "worker", "hinge_client", "client", "tests")
MAX_LINES = 600
SOLVER_NAMED_AT_MOST = {"sampled_cuts": 4}
"""Non-test source files outside the solver's own package that may name it: its spec, the client's lists."""

pytestmark = pytest.mark.unit


def _tracked(*paths: str, suffix: str = ".py") -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--", *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split() if name.endswith(suffix) and (ROOT / name).is_file()]


def test_no_module_is_longer_than_the_limit():
    long = {
        str(path.relative_to(ROOT)): n
        for path in _tracked(*PACKAGES)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
        and "/.cache/" not in str(path)
        and "/results/" not in str(path)
    }
    assert long == {}, f"modules over {MAX_LINES} lines: split them where their parts say what they hold"


def test_model_and_job_fields_are_not_read_by_string():
    reads = re.compile(r"""\b(meta|job)\[["']""")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _tracked("service", "worker")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if reads.search(line)
    ]
    assert found == []


@pytest.mark.parametrize("solver", list(SOLVER_NAMED_AT_MOST))
def test_a_solver_package_is_named_in_few_places_outside_it(solver):
    package = f"worker/solvers/{solver}/"
    assert (ROOT / package).is_dir(), f"{solver} is a package of its own"
    word = re.compile(rf"\b{solver}\b")
    outside = [
        str(path.relative_to(ROOT))
        for path in _tracked("core", "service", "worker", "hinge_client")
        if not str(path.relative_to(ROOT)).startswith(package) and word.search(path.read_text(encoding="utf-8"))
    ]
    assert len(outside) <= SOLVER_NAMED_AT_MOST[solver], outside
