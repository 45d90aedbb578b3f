"""The README is current: its walkthrough runs as written, its settings table lists every setting."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from core.config import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def walkthrough() -> str:
    block = README.split("<!-- walkthrough:start -->", 1)[1].split("<!-- walkthrough:end -->", 1)[0]
    return block.split("```sh", 1)[1].rsplit("```", 1)[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the walkthrough uses curl")
def test_walkthrough_runs_as_written(service, tmp_path):
    script = "set -eu\n" + walkthrough()
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"HINGE": service.base_url, "PATH": "/usr/bin:/bin:/usr/local/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"job job_\w+: succeeded", result.stdout), result.stdout
    prediction = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(prediction["labels"]) == 2 and all(label in (-1, 1) for label in prediction["labels"])


def test_every_setting_is_in_the_configuration_table():
    for name in Settings.model_fields:
        variable = "REDIS_URL" if name == "redis_url" else f"HINGE_{name.upper()}"
        assert f"`{variable}`" in README, f"README's configuration table lacks {variable}"


def test_ci_runs_the_readme_test_command():
    assert "./dev test" in README and "./dev serve" in README
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("exec ./dev test")
