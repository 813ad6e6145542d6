"""vllm_probe's connect and the HTTP layer under it (vllm_http) against a local HTTP server that
answers like vLLM's OpenAI API (the real server is exercised by the end-to-end test)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint, collect_stream
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_probe import ProbeError, connect, wait_for_health


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


def test_an_endpoint_names_the_server_with_or_without_v1():
    for url in ("http://h:8000/v1/", "http://h:8000/v1", "http://h:8000"):
        endpoint = Endpoint(url)
        assert endpoint.root == "http://h:8000" and endpoint.completions_url == "http://h:8000/v1/completions"
    assert Endpoint("http://h:8000").headers() == {}
    assert Endpoint("http://h:8000", "k").headers() == {"Authorization": "Bearer k"}


def test_a_request_carries_the_key_and_reports_the_status(fake):
    state, url = fake
    state.api_key = "s3cret"
    assert Endpoint(url, "s3cret").request("/v1/models").json()["data"][0]["id"] == "demo"
    refused = Endpoint(url, "wrong").request("/v1/models")
    assert refused.status == 401 and refused.json() == {"error": "Unauthorized"}
    answered = Endpoint(url, "s3cret").request("/v1/completions", {"model": "demo", "prompt": "a", "max_tokens": 5})
    assert answered.status == 200 and answered.json()["usage"]["completion_tokens"] == 7
    assert state.requests == [{"model": "demo", "prompt": "a", "max_tokens": 5}]
    assert Endpoint("http://127.0.0.1:9").request("/health").status is None  # nothing listening


def test_a_stream_reports_whether_done_came():
    whole = collect_stream([b'data: {"choices": [{"text": "a"}]}', b"", b": keep-alive",
                            b'data: {"usage": {"completion_tokens": 1}}', b"data: [DONE]", b'data: {"late": 1}'])
    assert whole.done and whole.chunks == [{"choices": [{"text": "a"}]}, {"usage": {"completion_tokens": 1}}]
    cut = collect_stream(['data: {"choices": [{"text": "a"}]}'])
    assert not cut.done and len(cut.chunks) == 1


def test_connect_waits_for_health_and_checks_the_model_with_the_key(fake):
    state, url = fake
    state.api_key = "s3cret"
    _client, models, waited = connect(url, "demo", "s3cret", health_timeout=5, request_timeout=5)
    assert models == ["demo"] and waited >= 0
    with pytest.raises(Exception, match="401|Unauthorized|[Aa]uthentication"):
        connect(url, "demo", "wrong", health_timeout=5, request_timeout=5)


def test_model_not_listed_fails_with_the_list(fake):
    state, url = fake
    state.models = ["other"]
    with pytest.raises(ProbeError, match=r"lists \['other'\], not 'demo'"):
        connect(url, "demo", "", health_timeout=5, request_timeout=5)


def test_unhealthy_server_times_out_with_its_status(fake):
    state, url = fake
    state.health_status = 503
    with pytest.raises(ProbeError, match="not healthy after 1 s \\(HTTP 503\\)"):
        wait_for_health(url, "", timeout=1, interval=0.2)


def test_nothing_listening_times_out():
    with pytest.raises(ProbeError, match="no answer"):
        wait_for_health("http://127.0.0.1:9/v1", "", timeout=0.5, interval=0.1)
