"""The load generator's verdict on one streamed completion (tests/harness/loadgen.py): the rolling
restart's "0 failed" is only as good as this count, so each way a request can go wrong is shown
to count as failed, against a local server that streams as vLLM does."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint
from tests.harness.loadgen import LoadGenerator, one_request


def chunk(text: str, finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": finish}]}).encode() + b"\n\n"


def usage(tokens: int) -> bytes:
    return b"data: " + json.dumps({"choices": [], "usage": {"completion_tokens": tokens}}).encode() + b"\n\n"


# What the server sends for a request asking max_tokens=2, by the prompt's first word.
STREAMS = {
    "whole": [chunk("a"), chunk("b", "length"), usage(2), b"data: [DONE]\n\n"],
    "cut": [chunk("a")],
    "aborted": [chunk("a", "abort"), usage(1), b"data: [DONE]\n\n"],
    "short": [chunk("a", "length"), usage(1), b"data: [DONE]\n\n"],
}


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict]]]:
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"body": body, "auth": self.headers.get("Authorization")})
            kind = body["prompt"].split()[0]
            if kind == "error":
                payload = b'{"error": {"message": "cannot schedule new futures after shutdown"}}'
                self.send_response(500)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for part in STREAMS.get(kind, STREAMS["whole"]):  # the generator's own prompts: whole answers
                self.wfile.write(part)
            self.close_connection = True

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", seen
    httpd.shutdown()


def test_only_a_whole_answer_counts_as_served(server):
    url, seen = server
    endpoint = Endpoint(url, "k", timeout=5)
    assert one_request(endpoint, "demo", "whole story", 2) == (True, 2, "")
    assert one_request(endpoint, "demo", "cut story", 2) == (False, 0, "stream ended early")
    assert one_request(endpoint, "demo", "aborted story", 2) == (False, 1, "cut short: finish_reason abort, 1 of 2 tokens")
    assert one_request(endpoint, "demo", "short story", 2) == (False, 1, "cut short: finish_reason length, 1 of 2 tokens")
    ok, tokens, error = one_request(endpoint, "demo", "error now", 2)
    assert not ok and error.startswith("HTTP 500:") and "cannot schedule new futures" in error
    assert not one_request(Endpoint("http://127.0.0.1:9/v1", timeout=2), "demo", "whole", 2)[0]  # refused
    # Every request is the streamed greedy ignore_eos completion, with the key.
    assert all(r["body"]["stream"] and r["body"]["ignore_eos"] and r["body"]["temperature"] == 0.0
               and r["auth"] == "Bearer k" for r in seen)


def test_the_generator_counts_what_it_sent(server):
    url, _seen = server
    with LoadGenerator(url, "demo", concurrency=2, max_tokens=2, pause=0.01) as load:
        threading.Event().wait(0.5)
    counts = load.counts
    assert counts.sent >= 4 and counts.served == counts.sent and counts.failed == 0, counts.as_dict()
