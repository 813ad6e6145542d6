from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import FetchError, head_size, shown_url


def test_messages_never_show_a_presigned_urls_query_or_credentials():
    presigned = "https://user:secret@bucket.example:9000/models/a.gguf?X-Amz-Signature=abc&X-Amz-Credential=k"
    assert shown_url(presigned) == "https://bucket.example:9000/models/a.gguf?<query hidden>"
    assert shown_url("http://127.0.0.1:8080/demo/a.gguf") == "http://127.0.0.1:8080/demo/a.gguf"


class SlowFirstHead(BaseHTTPRequestHandler):
    """Answers HEAD with a size, the first one only after the client has given up."""

    heads: list[float] = []

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self.heads.append(time.monotonic())
        if len(self.heads) == 1:
            time.sleep(1.0)
        status = 404 if self.path.endswith("/missing") else 200
        self.send_response(status)
        self.send_header("Content-Length", "1234")
        self.end_headers()

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def slow_first_head():
    SlowFirstHead.heads = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowFirstHead)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_head_request_without_an_answer_is_asked_again(slow_first_head: str):
    """A HEAD that times out once (a busy server, a dropped packet) does not fail the fetch while
    attempts are left; with one attempt it fails naming the file and the attempts."""
    assert head_size("shard.gguf", f"{slow_first_head}/shard.gguf", {}, timeout=0.3, attempts=2) == 1234
    assert len(SlowFirstHead.heads) == 2
    SlowFirstHead.heads = []
    with pytest.raises(FetchError, match=r"shard\.gguf: .*timed out.* \(after 1 attempt\(s\)\)"):
        head_size("shard.gguf", f"{slow_first_head}/shard.gguf", {}, timeout=0.3, attempts=1)


def test_a_head_request_the_server_answers_with_an_error_is_not_asked_again(slow_first_head: str):
    SlowFirstHead.heads = [0.0]  # no slow first answer
    with pytest.raises(FetchError, match="HTTP Error 404"):
        head_size("missing", f"{slow_first_head}/missing", {}, timeout=2, attempts=3)
    assert len(SlowFirstHead.heads) == 2
