from __future__ import annotations

import ssl
import threading
import time
import urllib.error
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils import model_download
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import (
    FetchError, RemoteFile, head_size, http_download, shown_url)


@pytest.fixture(autouse=True)
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses the code made between attempts, in seconds (no real sleeping in unit tests)."""
    made: list[float] = []
    monkeypatch.setattr(model_download, "pause", made.append)
    return made


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


class ScriptedAnswers(BaseHTTPRequestHandler):
    """GET and HEAD of /file: the next status of `script` while any is left, then the whole body."""

    body = b"x" * 5000
    script: list[int] = []
    asked: list[str] = []
    retry_after: str | None = None

    def answer(self, send_body: bool) -> None:
        self.asked.append(self.command)
        status = self.script.pop(0) if self.script else 200
        self.send_response(status)
        if self.retry_after and status != 200:
            self.send_header("Retry-After", self.retry_after)
        self.send_header("Content-Length", str(len(self.body) if status == 200 else 0))
        self.end_headers()
        if send_body and status == 200:
            self.wfile.write(self.body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.answer(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self.answer(send_body=False)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def scripted():
    ScriptedAnswers.script, ScriptedAnswers.asked, ScriptedAnswers.retry_after = [], [], None
    ScriptedAnswers.body = b"x" * 5000
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedAnswers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/file"
    server.shutdown()
    server.server_close()


def download(url: str, staging, attempts: int = 4, size: int | None = None):
    size = len(ScriptedAnswers.body) if size is None else size
    return http_download(RemoteFile("shard.gguf", url=url, size=size), staging, {}, 5, attempts)


@pytest.mark.parametrize("status", [403, 404, 410, 501])
def test_a_final_error_status_is_not_downloaded_again(scripted: str, tmp_path, pauses: list[float], status: int):
    """Asking a server three more times for a file it says is missing or forbidden only delays the
    message; the message names the file, the address and the status, not an "incomplete" download."""
    ScriptedAnswers.script = [status] * 4
    with pytest.raises(FetchError) as failed:
        download(scripted, tmp_path)
    assert str(failed.value).startswith(f"shard.gguf: {scripted}: HTTP Error {status}")
    assert ScriptedAnswers.asked == ["GET"] and pauses == []


@pytest.mark.parametrize("status", [429, 502, 503, 520])
def test_a_busy_or_restarting_server_is_asked_again_after_growing_pauses(
        scripted: str, tmp_path, pauses: list[float], status: int):
    ScriptedAnswers.script = [status, status, status]
    transfer = download(scripted, tmp_path)
    assert (tmp_path / "shard.gguf").read_bytes() == ScriptedAnswers.body
    assert transfer.attempts == 4 and ScriptedAnswers.asked == ["GET"] * 4 and pauses == [2.0, 5.0, 15.0]


def test_a_busy_server_on_every_attempt_fails_naming_the_attempts(scripted: str, tmp_path, pauses: list[float]):
    ScriptedAnswers.script = [503] * 3
    with pytest.raises(FetchError, match=r"shard\.gguf: download incomplete after 3 attempt\(s\) \(HTTP Error 503"):
        download(scripted, tmp_path, attempts=3)
    assert pauses == [2.0, 5.0]


def test_the_size_request_of_a_busy_server_is_asked_again(scripted: str, pauses: list[float]):
    ScriptedAnswers.script = [503]
    assert head_size("shard.gguf", scripted, {}, timeout=5, attempts=2) == len(ScriptedAnswers.body)
    assert ScriptedAnswers.asked == ["HEAD", "HEAD"] and pauses == [2.0]


def test_pauses_grow_and_then_stay_at_the_longest():
    assert [model_download.retry_pause_s(attempt) for attempt in range(1, 8)] == [2.0, 2.0, 5.0, 15.0, 30.0, 30.0, 30.0]


def test_a_busy_servers_retry_after_is_waited_for_up_to_a_limit(scripted: str, tmp_path, pauses: list[float]):
    ScriptedAnswers.script, ScriptedAnswers.retry_after = [503, 429], "20"
    download(scripted, tmp_path)
    ScriptedAnswers.script, ScriptedAnswers.retry_after = [503], "86400"
    (tmp_path / "shard.gguf").unlink()
    download(scripted, tmp_path)
    assert pauses == [20.0, 20.0, 300.0]


def test_a_head_requests_final_status_names_no_attempts(scripted: str):
    ScriptedAnswers.script = [404]
    with pytest.raises(FetchError) as failed:
        head_size("shard.gguf", scripted, {}, timeout=5, attempts=3)
    assert str(failed.value) == f"shard.gguf: {scripted}: HTTP Error 404: Not Found"


def test_a_file_larger_than_the_profile_says_fails_at_once_naming_both_sizes(scripted: str, tmp_path, pauses):
    with pytest.raises(FetchError) as failed:
        download(scripted, tmp_path, size=4000)
    assert str(failed.value).startswith("shard.gguf: the server sent 5000 bytes, more than the 4000 the model profile gives")
    assert ScriptedAnswers.asked == ["GET"] and pauses == [] and not (tmp_path / "shard.gguf.part").exists()


def test_a_part_file_longer_than_the_file_is_started_again(scripted: str, tmp_path):
    """A .part left by a run whose profile gave a bigger size is not a prefix of this file."""
    (tmp_path / "shard.gguf.part").write_bytes(b"y" * 6000)
    transfer = download(scripted, tmp_path)
    assert transfer.resumed_from == 0 and (tmp_path / "shard.gguf").read_bytes() == ScriptedAnswers.body


def test_an_error_of_the_staging_directory_is_not_retried(scripted: str, tmp_path, pauses):
    (tmp_path / "shard.gguf.part").mkdir()  # the part file's path is taken by a directory
    with pytest.raises(FetchError) as failed:
        download(scripted, tmp_path)
    assert "cannot fetch into" in str(failed.value) and "not retried" in str(failed.value)
    assert pauses == []


def test_a_rejected_certificate_is_not_retried_a_dropped_tls_stream_is():
    rejected = urllib.error.URLError(ssl.SSLCertVerificationError(1, "certificate verify failed"))
    assert not model_download.worth_retrying(rejected)
    assert model_download.worth_retrying(ssl.SSLError(1, "decryption failed or bad record mac"))
    assert model_download.worth_retrying(urllib.error.URLError(ConnectionRefusedError(111, "refused")))
