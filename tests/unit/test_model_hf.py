"""The hf source through huggingface_hub's real client against a local stand-in for the hub's HTTP API
(model info with file metadata, resolve with Range): no hub is reachable here."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import resolve_hf
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_fetch import FetchRequest, ensure_model
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_store import ModelStore
from tests.unit.test_model_fetch import SHARDS, make_set

pytest.importorskip("huggingface_hub")

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "fleet/demo-qwen3-GGUF"
LFS_SUFFIX = ".gguf"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub(BaseHTTPRequestHandler):
    """The two endpoints huggingface_hub uses here; files under Q8/ are LFS, the others plain git."""

    protocol_version = "HTTP/1.1"
    files: dict[str, Path] = {}
    requests: list[tuple[str, str, str | None]] = []
    token: str | None = None

    def log_message(self, *args) -> None:
        pass

    def authorized(self) -> bool:
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        return True

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path, self.headers.get("Range")))
        if not self.authorized():
            return
        if self.path.startswith(f"/api/models/{REPO}/revision/"):
            siblings = []
            for name, path in self.files.items():
                data = path.read_bytes()
                sibling = {"rfilename": name, "size": len(data), "blobId": git_blob_id(data)}
                if name.endswith(LFS_SUFFIX):
                    sibling["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
                siblings.append(sibling)
            body = json.dumps({"id": REPO, "modelId": REPO, "sha": COMMIT, "siblings": siblings}).encode()
            self.reply(200, body, {"Content-Type": "application/json"})
            return
        self.resolve(body=True)

    def do_HEAD(self) -> None:
        self.requests.append(("HEAD", self.path, self.headers.get("Range")))
        if self.authorized():
            self.resolve(body=False)

    def resolve(self, body: bool) -> None:
        match = re.match(rf"^/{REPO}/resolve/([^/]+)/(.+)$", self.path)
        if not match or match[2] not in self.files:
            self.reply(404, b"", {"X-Error-Code": "EntryNotFound"})
            return
        data = self.files[match[2]].read_bytes()
        etag = hashlib.sha256(data).hexdigest() if match[2].endswith(LFS_SUFFIX) else git_blob_id(data)
        headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        start = int(re.match(r"bytes=(\d+)-", self.headers.get("Range", "bytes=0-"))[1])
        status = 206 if start else 200
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        self.reply(status, data[start:], headers, send_body=body)

    def reply(self, status: int, body: bytes, headers: dict[str, str], send_body: bool = True) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)


@pytest.fixture
def hub(tmp_path: Path):
    model = make_set(tmp_path / "set")
    FakeHub.files = {f"Q8/{name}": model / name for name in SHARDS}
    FakeHub.files.update({name: model / name for name in ("config.json", "tokenizer.json", "README.md")})
    (model / "README.md").write_text("# demo\n")
    FakeHub.requests = []
    FakeHub.token = "hf_secret"
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", model
    server.shutdown()
    server.server_close()


def hf_request(endpoint: str, root: Path, token: str = "hf_secret") -> FetchRequest:
    _revision, shards = resolve_hf(REPO, "main", [f"*{n}" for n in SHARDS], token, endpoint)
    _config_revision, config = resolve_hf(REPO, "main", ["config.json", "tokenizer.json"], token, endpoint)
    return FetchRequest(root=str(root), name="hf-demo", source="hf", files=shards + config, gguf_files=SHARDS,
                        expected_architecture="qwen3", margin_bytes=0, hf_token=token, hf_endpoint=endpoint)


def test_resolve_reads_sizes_and_hashes_from_the_hub_metadata(hub):
    endpoint, model = hub
    commit, files = resolve_hf(REPO, "main", ["Q8/*", "config.json"], "hf_secret", endpoint)
    assert commit == COMMIT
    by_name = {f.name: f for f in files}
    assert sorted(by_name) == sorted([*SHARDS, "config.json"])
    shard = by_name[SHARDS[0]]
    assert shard.hub_path == f"Q8/{SHARDS[0]}" and shard.hub_revision == COMMIT
    assert shard.sha256 == hashlib.sha256((model / SHARDS[0]).read_bytes()).hexdigest()
    assert shard.size == (model / SHARDS[0]).stat().st_size
    assert by_name["config.json"].sha256 is None
    assert by_name["config.json"].git_blob_sha1 == git_blob_id((model / "config.json").read_bytes())


def test_hf_download_verify_place_and_second_run_is_metadata_only(hub, tmp_path: Path):
    endpoint, model = hub
    first = ensure_model(hf_request(endpoint, tmp_path / "models"))
    assert first.problems == [] and first.switched
    current = ModelStore(tmp_path / "models", "hf-demo").current
    assert sorted(p.name for p in current.iterdir() if not p.name.startswith(".")) == sorted(
        [*SHARDS, "config.json", "tokenizer.json"])
    assert (current / SHARDS[2]).read_bytes() == (model / SHARDS[2]).read_bytes()
    assert not (current / ".hf").exists()
    assert any(method == "GET" and f"/resolve/{COMMIT}/Q8/{SHARDS[0]}" in path for method, path, _range in FakeHub.requests)

    FakeHub.requests = []
    second = ensure_model(hf_request(endpoint, tmp_path / "models"))
    assert not second.changed and second.hashed_files == []
    assert all("/api/models/" in path for _method, path, _range in FakeHub.requests)


def test_a_hub_file_that_does_not_match_its_lfs_hash_is_refused(hub, tmp_path: Path):
    endpoint, model = hub
    request = hf_request(endpoint, tmp_path / "models")
    # The metadata was read; now the hub serves other bytes for shard 2 (a corrupted or swapped blob).
    (model / SHARDS[1]).write_bytes((model / SHARDS[1]).read_bytes()[:-1] + b"\0")
    result = ensure_model(request)
    assert result.problems and result.problems[0].startswith(f"{SHARDS[1]}: ")
    assert ModelStore(tmp_path / "models", "hf-demo").current_version() is None


def test_a_wrong_token_is_named(hub, tmp_path: Path):
    endpoint, _model = hub
    with pytest.raises(Exception, match="401"):
        resolve_hf(REPO, "main", ["*"], "hf_wrong", endpoint)
