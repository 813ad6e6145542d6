"""vllm_probe against a local HTTP server that answers like vLLM's OpenAI API (the real server
is exercised by the end-to-end test)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_probe import ProbeError, probe_service, server_root, wait_for_health


class FakeVllm:
    def __init__(self) -> None:
        self.health_status = 200
        self.models = ["demo"]
        self.text = " Paris, the city of light"
        self.completion_tokens = 7
        self.api_key = ""
        self.requests: list[dict] = []


def make_handler(state: FakeVllm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def reply(self, status: int, body: dict | None = None) -> None:
            payload = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def authorized(self) -> bool:
            return not state.api_key or self.headers.get("Authorization") == f"Bearer {state.api_key}"

        def do_GET(self) -> None:
            if self.path == "/health":
                return self.reply(state.health_status)
            if not self.authorized():
                return self.reply(401, {"error": "Unauthorized"})
            if self.path == "/v1/models":
                return self.reply(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "vllm"} for m in state.models]})
            self.reply(404)

        def do_POST(self) -> None:
            if not self.authorized():
                return self.reply(401, {"error": "Unauthorized"})
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            self.reply(200, {
                "id": "cmpl-1", "object": "text_completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "text": state.text, "finish_reason": "length", "logprobs": None}],
                "usage": {"prompt_tokens": 3, "completion_tokens": state.completion_tokens,
                          "total_tokens": 3 + state.completion_tokens},
            })

    return Handler


@pytest.fixture
def fake() -> Iterator[tuple[FakeVllm, str]]:
    state = FakeVllm()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_server_root_strips_v1():
    assert server_root("http://h:8000/v1/") == "http://h:8000"
    assert server_root("http://h:8000") == "http://h:8000"


def test_probe_reports_tokens_from_usage(fake):
    state, url = fake
    result = probe_service(url, "demo", ["a", "b"], max_tokens=5, health_timeout=5)
    assert result.served_models == ["demo"]
    # usage.completion_tokens counts, not max_tokens: vLLM may return more than asked.
    assert result.completion_tokens == 14
    assert result.tokens_per_second > 0
    assert [r["prompt"] for r in state.requests] == ["a", "b"]
    assert all(r["temperature"] == 0.0 and r["max_tokens"] == 5 for r in state.requests)
    summary = result.as_dict()
    assert summary["completion_tokens"] == 14
    assert summary["samples"][0]["text"] == state.text


def test_probe_sends_the_api_key(fake):
    state, url = fake
    state.api_key = "s3cret"
    assert probe_service(url, "demo", ["a"], 5, api_key="s3cret", health_timeout=5).completion_tokens == 7
    with pytest.raises(Exception, match="401|Unauthorized|[Aa]uthentication"):
        probe_service(url, "demo", ["a"], 5, api_key="wrong", health_timeout=5)


def test_model_not_listed_fails_with_the_list(fake):
    state, url = fake
    state.models = ["other"]
    with pytest.raises(ProbeError, match=r"lists \['other'\], not 'demo'"):
        probe_service(url, "demo", ["a"], 5, health_timeout=5)


def test_empty_completion_fails(fake):
    state, url = fake
    state.text, state.completion_tokens = "", 0
    with pytest.raises(ProbeError, match="empty completion"):
        probe_service(url, "demo", ["a"], 5, health_timeout=5)


def test_unhealthy_server_times_out_with_its_status(fake):
    state, url = fake
    state.health_status = 503
    with pytest.raises(ProbeError, match="not healthy after 1 s \\(HTTP 503\\)"):
        wait_for_health(url, "", timeout=1, interval=0.2)


def test_nothing_listening_times_out():
    with pytest.raises(ProbeError, match="no answer"):
        wait_for_health("http://127.0.0.1:9/v1", "", timeout=0.5, interval=0.1)
