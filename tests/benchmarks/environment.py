"""What every benchmark records about the machine it ran on."""

from __future__ import annotations

import os
import platform
from datetime import datetime, timezone


def machine() -> dict:
    """CPU, cores, Python/numba versions, thread settings and the date."""
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import numba

        numba_version = numba.__version__
        threads = numba.config.NUMBA_NUM_THREADS
        layer = os.environ.get("NUMBA_THREADING_LAYER", numba.config.THREADING_LAYER)
    except ImportError:  # pragma: no cover
        numba_version, threads, layer = None, None, None
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numba": numba_version,
        "numba_threads": threads,
        "numba_threading_layer": layer,
        "platform": platform.platform(),
    }
