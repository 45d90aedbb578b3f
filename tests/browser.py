"""A real browser for the dashboard tests: Debian's Chromium driven by playwright.

``chromium_or_skip()`` finds /usr/bin/chromium, or installs Debian's `chromium` package when it can
(root with apt-get: what CI has; about a minute, once per machine), or skips the test with the
reason. The browser starts headless with no network of its own (no component updates, no sync),
and the tests refuse every request that does not go to the service under test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlparse

import pytest

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
"""Where the dashboard tests save their screenshots."""
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]


def _installed() -> str | None:
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return None


def install_chromium() -> tuple[str | None, str]:
    """Install Debian's chromium (root and apt-get only); returns (path or None, what happened)."""
    if _installed():
        return _installed(), "already installed"
    if shutil.which("apt-get") is None:
        return None, "no apt-get on this machine to install Debian's chromium"
    if os.geteuid() != 0:
        return None, "not root: install it with `sudo apt-get install chromium`"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"],
    ):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
        if proc.returncode != 0:
            return None, f"`{' '.join(argv)}` failed: {proc.stderr.strip()[-300:]}"
    return _installed(), "installed with apt-get"


def chromium_or_skip() -> str:
    """The Chromium executable, installed if needed; skips the calling test when there can be none."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (it is in the dev extras: ./dev test installs it)")
    path, why = install_chromium()
    if path is None:
        pytest.skip(f"no Chromium for the browser test: {why}")
    return path


def offline_page(browser, base_url: str):
    """A page that may only talk to the service; returns (page, list of refused URLs)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    allowed = urlparse(base_url).netloc
    refused: list[str] = []

    def gate(route):
        url = urlparse(route.request.url)
        if url.scheme in ("data", "blob") or url.netloc == allowed:
            return route.continue_()
        refused.append(route.request.url)
        return route.abort()

    page.route("**/*", gate)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    return page, refused


DATASET_LOOKUP = re.compile(r"/v1/datasets/ds_[0-9a-f]+")
"""The dashboard's lookup of a data set that a job or model names, beyond the first page of its list."""


def record_error_answers(page) -> list[tuple[int, str]]:
    """Record on ``page.failed`` every answer of 400 or more the page gets, except a 404 to a data set lookup: the
    dashboard asks once for a data set a job or model names and shows "deleted data set" when it is gone, which
    in a shared service is any earlier test's (estimators delete theirs once fitted)."""
    failed: list[tuple[int, str]] = []

    def answer(response) -> None:
        if response.status < 400:
            return
        if (
            response.status == 404
            and response.request.method == "GET"
            and DATASET_LOOKUP.fullmatch(urlparse(response.url).path)
        ):
            return
        failed.append((response.status, response.url))

    page.on("response", answer)
    page.failed = failed
    return failed
