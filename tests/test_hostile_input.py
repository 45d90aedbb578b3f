"""Hostile input: schemathesis on every operation, and a corpus of malformed uploads built by the test.

The corpus runs against an API process with limits of its own (listed in ``LIMITS``); big inputs
(the 2 GB line, the row with 10^7 features, a 200 MB JSON body) are produced by generators and
streamed with chunked transfer encoding over a raw socket that stops sending as soon as the server
answers, so neither side ever holds them; the API's resident memory is measured around them.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import select
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

from service.embedded_redis import free_port
from tests.conftest import _terminate, start_api, wait_ready
from tests.helpers import assert_error, upload

RESULTS = Path(__file__).resolve().parent / "benchmarks" / "results"
FUZZ_EXAMPLES = 12  # per operation and mode (positive, negative): about 400 cases, well under a minute

MiB = 1024 * 1024
LIMITS = {
    "HINGE_MAX_UPLOAD_BYTES": str(512 * MiB),
    "HINGE_MAX_LINE_BYTES": str(128 * MiB),
    "HINGE_MAX_FEATURES": "1000000",
    "HINGE_MAX_NNZ": "2000000",
    "HINGE_MAX_JSON_BODY_BYTES": str(1 * MiB),
}


def test_schemathesis_every_operation_no_5xx_and_schema_conformant(service):
    from tests.fuzzing import fuzz

    totals = fuzz(service.base_url, FUZZ_EXAMPLES)
    if os.environ.get("HINGE_RECORD_RESULTS"):  # a plain test run leaves the repository unchanged
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "fuzz_ci.json").write_text(
            json.dumps(dict(totals, examples_per_operation_and_mode=FUZZ_EXAMPLES), indent=2) + "\n"
        )
    assert totals["status_5xx"] == 0
    document = json.loads((Path(__file__).resolve().parent.parent / "openapi" / "openapi.json").read_text())
    assert totals["operations"] == sum(len(ops) for ops in document["paths"].values())
    assert all(counts["cases"] > 0 for counts in totals["per_operation"].values()), totals["per_operation"]


# -- the corpus ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def limited_api(service):
    env = dict(service.env, **LIMITS)
    port = free_port()
    proc = start_api(env, port)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc, path="/healthz", timeout=120)
        yield base, proc
    finally:
        _terminate(proc)


def warmed_rss_bytes(base: str, pid: int) -> int:
    """rss_bytes after one small upload: the ingest process exists and has its parser kernels loaded (on a
    cold numba cache it compiles them, which costs about 200 MiB of its own, not of the upload's)."""
    status, body, _ = stream_post(
        base, "/v1/datasets", multipart([b"1 1:1\n-1 2:1\n"]), "multipart/form-data; boundary=hingeboundary"
    )
    assert status == 201, body
    return rss_bytes(pid)


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and its children (the ingest processes)."""
    from tests.cluster import descendants

    total = 0
    for p in {pid, *descendants(pid)}:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def stream_post(base: str, path: str, pieces, content_type: str) -> tuple[int, dict, int]:
    """POST a body produced piece by piece (chunked); stop sending once the server answers.

    Returns (status, JSON body, bytes sent).
    """
    url = urlparse(base)
    sock = socket.create_connection((url.hostname, url.port), timeout=120)
    sock.sendall(
        (
            f"POST {path} HTTP/1.1\r\nHost: {url.hostname}\r\nContent-Type: {content_type}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        ).encode()
    )
    sent = 0
    try:
        for piece in pieces:
            if select.select([sock], [], [], 0)[0]:
                break  # the answer is there: stop sending
            sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            sent += len(piece)
        else:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass
    raw = b""
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            break
        if not data:
            break
        raw += data
        head, _, rest = raw.partition(b"\r\n\r\n")
        match = re.search(rb"content-length: *(\d+)", head, re.I)
        if match and len(rest) >= int(match.group(1)):
            break
    sock.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body), sent


def multipart(pieces, boundary: str = "hingeboundary"):
    """Wrap generated file pieces in a multipart/form-data body (field `file`)."""
    yield (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="x.svm"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    yield from pieces
    yield f"\r\n--{boundary}--\r\n".encode()


def long_line(total: int, piece: int = 4 * MiB):
    """`1 ` then `1:1` padded with spaces to ``total`` bytes, no newline: one line."""
    yield b"1 1:1"
    block = b" " * piece
    sent = 5
    while sent < total:
        n = min(piece, total - sent)
        yield block[:n]
        sent += n


def wide_row(n_features: int):
    """One row with features 1..n_features (about 10 bytes each)."""
    yield b"1"
    step = 100_000
    for start in range(1, n_features + 1, step):
        yield "".join(f" {j}:1" for j in range(start, min(start + step, n_features + 1))).encode()
    yield b"\n-1 1:1\n"


def assert_answer(status, body, code: int, error_code: str, *fragments):
    assert status == code, body
    assert body["error"]["code"] == error_code, body
    for fragment in fragments:
        assert fragment in body["error"]["message"], (fragment, body["error"]["message"])


def test_two_gigabyte_line_is_refused_and_memory_stays_bounded(limited_api):
    base, proc = limited_api
    before = warmed_rss_bytes(base, proc.pid)
    status, body, sent = stream_post(
        base, "/v1/datasets", multipart(long_line(2_000_000_000)), "multipart/form-data; boundary=hingeboundary"
    )
    assert_answer(status, body, 413, "payload_too_large", "HINGE_MAX_UPLOAD_BYTES")
    assert sent < 2_000_000_000, "refused while streaming, not after"
    grown = rss_bytes(proc.pid) - before
    assert grown < 200 * MiB, f"API and ingest processes grew by {grown / MiB:.0f} MiB"


def test_long_line_is_refused_by_the_line_limit(limited_api):
    base, proc = limited_api
    before = warmed_rss_bytes(base, proc.pid)
    status, body, _ = stream_post(
        base, "/v1/datasets", multipart(long_line(300 * MiB)), "multipart/form-data; boundary=hingeboundary"
    )
    assert_answer(status, body, 413, "payload_too_large", "HINGE_MAX_LINE_BYTES", "line 1")
    grown = rss_bytes(proc.pid) - before
    assert grown < 400 * MiB, f"API and ingest processes grew by {grown / MiB:.0f} MiB"


def test_ten_million_features_in_one_row_is_refused(limited_api):
    base, _ = limited_api
    status, body, _ = stream_post(
        base, "/v1/datasets", multipart(wide_row(10_000_000)), "multipart/form-data; boundary=hingeboundary"
    )
    assert_answer(status, body, 413, "payload_too_large", "HINGE_MAX_FEATURES", "line 1")


def test_streamed_json_body_over_the_limit_is_refused(limited_api):
    base, proc = limited_api
    before = warmed_rss_bytes(base, proc.pid)

    def body():
        yield b'{"instances": ['
        row = b"[" + b"0.0," * 1000 + b"0.0],"
        for _ in range(200 * MiB // len(row)):
            yield row * 1

    status, answer, sent = stream_post(base, "/v1/models/mdl_x/predict", body(), "application/json")
    assert_answer(status, answer, 413, "payload_too_large", "HINGE_MAX_JSON_BODY_BYTES")
    status, answer, _ = stream_post(base, "/v1/jobs", body(), "application/json")
    assert_answer(status, answer, 413, "payload_too_large", "HINGE_MAX_JSON_BODY_BYTES")
    assert rss_bytes(proc.pid) - before < 100 * MiB


CORPUS = {
    "truncated gzip": (
        lambda: (lambda z: z[: len(z) // 2])(
            gzip.compress(b"".join(b"%d 1:%d 2:0.5\n" % (i % 2, i) for i in range(50000)))
        ),
        422,
        "parse_error",
        ["gzip"],
    ),
    "binary garbage": (lambda: bytes(range(256)) * 64, 422, "parse_error", ["line 1"]),
    "label not a number": (lambda: b"1 1:1\nspam 2:1\n", 422, "parse_error", ["line 2", "label"]),
    "mixed qid": (lambda: b"1 qid:1 1:1\n-1 qid:1 2:1\n1 3:1\n", 422, "parse_error", ["line 3", "qid"]),
    "value not a number": (lambda: b"1 1:0x1F\n", 422, "parse_error", ["line 1"]),
    "csv without label column": (lambda: b"a,b\n1,2\n", 422, "parse_error", ["label"]),
    "too many values (nnz)": (
        lambda: b"".join(b"1 " + b" ".join(b"%d:1" % j for j in range(1, 101)) + b"\n" for _ in range(20_001)),
        413,
        "payload_too_large",
        ["HINGE_MAX_NNZ"],
    ),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_malformed_file_is_rejected_with_its_message(limited_api, name):
    import httpx

    base, _ = limited_api
    make, status, code, fragments = CORPUS[name]
    params = {"format": "csv"} if name.startswith("csv") else {}
    with httpx.Client(base_url=base, timeout=120) as http:
        before = http.get("/v1/datasets").json()["total"]
        assert_error(upload(http, make(), **params), status, code, *fragments)
        assert http.get("/v1/datasets").json()["total"] == before, "nothing stored"
