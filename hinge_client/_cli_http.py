"""The HTTP side of `hingectl`: one httpx client, the error shape, streamed uploads and the event stream.

Private to the command line (the client library has its own); it talks only HTTP and imports
nothing from the service.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
CHUNK = 1 << 20


class CliError(Exception):
    """A failure to report on stderr with an exit code (see hinge_client.cli)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code
        self.status: int | None = None  # the HTTP status, when the service answered
        self.code: str | None = None  # the service's error code, when it answered one

    def reworded(self, message: str) -> CliError:
        """The same error (exit code, status, code) with another message."""
        error = CliError(message, self.exit_code)
        error.status, error.code = self.status, self.code
        return error


# exit codes (documented in hinge_client.cli)
EXIT_OK, EXIT_JOB_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND, EXIT_AUTH, EXIT_REFUSED, EXIT_SERVER = range(8)


def exit_code_for(status: int) -> int:
    """The exit code of an HTTP error status."""
    if status == 404:
        return EXIT_NOT_FOUND
    if status in (401, 403):
        return EXIT_AUTH
    if status >= 500:
        return EXIT_SERVER
    return EXIT_REFUSED


@dataclass
class Api:
    """The service at ``url``, with an API key when given."""

    url: str
    api_key: str | None = None
    timeout: float = 60.0

    def __post_init__(self):
        headers = {"User-Agent": "hingectl"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        self.client = httpx.Client(base_url=self.url.rstrip("/"), headers=headers, timeout=self.timeout)

    def close(self) -> None:
        self.client.close()

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """Send a request; connection failures and error answers become CliError."""
        try:
            response = self.client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(
                f"cannot reach {self.url} ({type(exc).__name__}: {exc}); is the service running? (--url or HINGE_URL)",
                EXIT_UNREACHABLE,
            ) from None
        if response.status_code >= 400:
            raise api_error(response)
        return response

    def json(self, method: str, path: str, **kwargs):
        """The JSON answer of a request."""
        return self.request(method, path, **kwargs).json()

    def upload(
        self,
        path: str,
        params: dict,
        on_progress: Callable[[int, int], None] | None = None,
        route: str = "/v1/datasets",
    ) -> dict:
        """Stream a file as multipart/form-data (field `file`) to ``route``, reporting (sent, total) bytes.

        An answer naming a line of the file (``line 3, column 7: ...``) is prefixed with the file's path.
        """
        boundary = uuid.uuid4().hex
        name = os.path.basename(path).replace('"', "_")
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        size = os.path.getsize(path)

        def body() -> Iterator[bytes]:
            yield head
            sent = 0
            with open(path, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    sent += len(chunk)
                    if on_progress is not None:
                        on_progress(sent, size)
                    yield chunk
            yield tail

        headers = {
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(len(head) + size + len(tail)),
        }
        try:
            return self.json(
                "POST",
                route,
                params=params,
                content=body(),
                headers=headers,
                timeout=httpx.Timeout(self.timeout, read=None),
            )
        except CliError as exc:
            if re.search(r"\bline \d+", str(exc)):
                raise exc.reworded(f"{path}: {exc}") from None
            raise

    def events(self, job_id: str) -> Iterator[tuple[str, dict]]:
        """(event, data) of a job's event stream until its `end` event, reconnecting with Last-Event-ID."""
        last_id: str | None = None
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                with self.client.stream(
                    "GET", f"/v1/jobs/{job_id}/events", headers=headers, timeout=httpx.Timeout(self.timeout, read=None)
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise api_error(response)
                    for kind, event_id, data in parse_sse(response.iter_lines()):
                        failures = 0
                        if event_id is not None:
                            last_id = event_id
                        yield kind, data
                        if kind == "end":
                            return
            except httpx.TransportError as exc:
                failures += 1
                if failures > 5:
                    raise CliError(
                        f"lost the event stream of {job_id} ({exc}) five times in a row", EXIT_UNREACHABLE
                    ) from None


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, str | None, dict]]:
    """(event, id, JSON data) of each event in a text/event-stream (comments and retry lines skipped)."""
    kind, event_id, data = "message", None, []  # type: tuple[str, str | None, list[str]]
    for line in lines:
        if line == "":
            if data:
                yield kind, event_id, json.loads("\n".join(data))
            kind, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            kind = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value


def api_error(response: httpx.Response) -> CliError:
    """The service's error answer as a CliError (message, code, status)."""
    try:
        error = response.json()["error"]
        message, code = error["message"], error["code"]
    except (ValueError, KeyError, TypeError):
        message, code = response.text[:300] or response.reason_phrase, "http_error"
    error = CliError(f"{message} (HTTP {response.status_code} {code})", exit_code_for(response.status_code))
    error.status, error.code = response.status_code, code
    return error
