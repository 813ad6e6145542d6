"""The one HTTP layer to a vLLM server: where it is (an Endpoint with its key), an authenticated
request, and the server-sent-event lines of a streamed completion. Standard library only: the
readiness gate and the drain run it on the hosts, the benchmarks and the load generator on the
controller."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterable

DONE = "[DONE]"


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: no answer (refused, reset, timed out)
    body: bytes = b""

    def json(self) -> Any:
        """The body parsed, or None when it is not JSON."""
        try:
            return json.loads(self.body or b"null")
        except ValueError:
            return None


@dataclass(frozen=True)
class Endpoint:
    """A vLLM server: its URL with or without /v1 (both name the same server), its API key and the
    timeout of one request."""

    base_url: str
    api_key: str = ""
    timeout: float = 30.0

    @property
    def root(self) -> str:
        """http://h:p/v1 -> http://h:p, where vLLM serves /health, /metrics and /version."""
        root = self.base_url.rstrip("/")
        return root[: -len("/v1")] if root.endswith("/v1") else root

    @property
    def completions_url(self) -> str:
        return self.url("/v1/completions")

    def url(self, path: str) -> str:
        return self.root + path

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def open(self, path: str, body: dict | None = None, timeout: float | None = None) -> Any:
        """The response of one request (a context manager, read as lines for a stream); raises
        urllib's errors: HTTPError for a status, URLError or OSError for no answer."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url(path), data=data, headers=self.headers())
        if data is not None:
            request.add_header("Content-Type", "application/json")
        # urllib's default opener, as its module-level open function uses: proxies from the
        # environment, redirects, HTTPS with the default context, HTTPError for an error status.
        return urllib.request.build_opener().open(request, timeout=self.timeout if timeout is None else timeout)

    def request(self, path: str, body: dict | None = None, timeout: float | None = None) -> Reply:
        """One request; an HTTP error is a Reply with its status, no answer a Reply with None."""
        try:
            with self.open(path, body, timeout) as response:
                return Reply(response.status, response.read())
        except urllib.error.HTTPError as error:
            return Reply(error.code, error.read() if error.fp else b"")
        except (urllib.error.URLError, OSError):
            return Reply(None)


def event_data(line: str) -> str | None:
    """The data of one server-sent-event line; None for blank lines, comments and other fields."""
    return line[5:].strip() if line.startswith("data:") else None


@dataclass
class Stream:
    """What a streamed completion sent: its JSON chunks and whether it ended with [DONE]."""

    chunks: list[dict]
    done: bool


def collect_stream(lines: Iterable[bytes | str]) -> Stream:
    """The JSON chunks of an event stream up to [DONE], and whether [DONE] came."""
    chunks: list[dict] = []
    done = False
    for raw in lines:
        data = event_data(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        if data == DONE:
            done = True
            break
        if data is not None:
            chunks.append(json.loads(data))
    return Stream(chunks, done)
