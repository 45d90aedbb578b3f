"""What every benchmark records about the machine it ran on."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"
"""The benchmark data sets (../shared/data next to the repository)."""


def cpu_model() -> str:
    """The CPU's model name."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """CPU, cores, Python/numba versions, thread settings and the date."""
    cpu = cpu_model()
    try:
        import numba

        numba_version = numba.__version__
        threads = numba.config.NUMBA_NUM_THREADS
        layer = os.environ.get("NUMBA_THREADING_LAYER", numba.config.THREADING_LAYER)
    except ImportError:  # pragma: no cover
        numba_version, threads, layer = None, None, None
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numba": numba_version,
        "numba_threads": threads,
        "numba_threading_layer": layer,
        "platform": platform.platform(),
    }
