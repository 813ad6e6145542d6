"""A local HTTP file server for the model-download tests and benchmark: Range requests, a request
log, a mode that drops the connection part way through a file, and one that runs a callback part
way through a file before it sends the rest (to change the client's host at a known byte)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
CHUNK = 1024 * 1024


@dataclass
class ServedRequest:
    method: str
    path: str
    range: str | None
    status: int
    bytes_sent: int


@dataclass
class ServerState:
    root: Path
    drop_after: dict[str, int] = field(default_factory=dict)  # file name -> bytes sent before dropping, once
    # file name -> (bytes sent, callback run then, before the rest is sent), once
    pause_after: dict[str, tuple[int, Callable[[], None]]] = field(default_factory=dict)
    log: list[ServedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sent(self, name: str, method: str = "GET") -> int:
        return sum(r.bytes_sent for r in self.log if r.path.endswith("/" + name) and r.method == method)


class Handler(BaseHTTPRequestHandler):
    server: "ModelHTTPServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: the request log is kept in the state
        pass

    def do_HEAD(self) -> None:
        self.serve(body=False)

    def do_GET(self) -> None:
        self.serve(body=True)

    def serve(self, body: bool) -> None:
        state = self.server.state
        path = state.root / self.path.lstrip("/").split("?")[0]
        wanted = self.headers.get("Range")
        if not path.is_file():
            self.record(wanted, 404)
            self.send_error(404)
            return
        size = path.stat().st_size
        start, end, status = 0, size - 1, 200
        match = RANGE.match(wanted or "")
        if match:
            start = int(match[1])
            end = int(match[2]) if match[2] else size - 1
            if start >= size:
                self.record(wanted, 416)
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        # logged as it arrives: a client that gives up early must not outrun its own log entry
        entry = self.record(wanted, status, "GET" if body else "HEAD")
        self.send_response(status)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if not body:
            return
        with state.lock:
            drop = state.drop_after.pop(path.name, None)
            pause, paused = state.pause_after.pop(path.name, (None, None))
        sent = 0
        with path.open("rb") as handle:
            handle.seek(start)
            remaining = end - start + 1
            while remaining > 0:
                stop_at = min(at for at in (drop, pause, sent + remaining) if at is not None and at > sent)
                data = handle.read(min(CHUNK, stop_at - sent))
                if not data:
                    break
                self.wfile.write(data)
                sent += len(data)
                remaining -= len(data)
                entry.bytes_sent = sent
                if paused is not None and sent >= pause:
                    self.wfile.flush()
                    paused()
                    paused = None
                if drop is not None and sent >= drop:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)  # the peer sees the body end early
                    break

    def record(self, wanted: str | None, status: int, method: str = "GET") -> ServedRequest:
        """Log the request as it arrives; its bytes_sent grows as the body goes out."""
        entry = ServedRequest(method, self.path, wanted, status, 0)
        with self.server.state.lock:
            self.server.state.log.append(entry)
        return entry


class ModelHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), Handler)
        self.state = ServerState(root)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def __enter__(self) -> "ModelHTTPServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()

    def url(self, name: str, host: str | None = None) -> str:
        return f"http://{host or self.server_address[0]}:{self.server_address[1]}/{name}"
