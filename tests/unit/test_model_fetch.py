"""The model fetch logic against a real local HTTP server and real files (split sets made with gguf's writer)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils import model_download
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import FetchError, RemoteFile, http_download
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_fetch import FetchRequest, ensure_model
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_store import MANIFEST, ModelStore, damaged_files
from tests.e2e.model_http_server import ModelHTTPServer

from tests.fixtures.models.make_split_demo import HF_FILES, split_gguf

from tests.conftest import DEMO_MODEL_DIR  # noqa: E402

STEM = "demo-qwen3-F32"
SHARDS = [f"{STEM}-0000{i}-of-00003.gguf" for i in (1, 2, 3)]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_set(target: Path, shift: int = 0) -> Path:
    split_gguf(DEMO_MODEL_DIR / "demo-qwen3-F32.gguf", target, STEM, 3, shift)
    for name in HF_FILES:
        shutil.copy2(DEMO_MODEL_DIR / name, target / name)
    return target


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sets")
    return {"a": make_set(base / "a"), "b": make_set(base / "b", shift=1)}


@pytest.fixture
def served(sets, tmp_path: Path):
    root = tmp_path / "www"
    for name, directory in sets.items():
        shutil.copytree(directory, root / name)
    with ModelHTTPServer(root) as server:
        yield server


def url_request(server: ModelHTTPServer, model_root: Path, set_name: str = "a", **overrides) -> FetchRequest:
    directory = server.state.root / set_name
    files = [RemoteFile(name=n, url=server.url(f"{set_name}/{n}"), sha256=sha256(directory / n))
             for n in [*SHARDS, "config.json", "tokenizer.json", "tokenizer_config.json"]]
    options = {"root": str(model_root), "name": "split-demo", "source": "url", "files": files, "gguf_files": SHARDS,
               "expected_architecture": "qwen3", "expected_tensor_count": 25, "margin_bytes": 0, "attempts": 1}
    options.update(overrides)
    return FetchRequest(**options)


def gets(server: ModelHTTPServer) -> list[str]:
    return [r.path for r in server.state.log if r.method == "GET"]


def test_download_verify_place_then_nothing_to_do(served: ModelHTTPServer, tmp_path: Path):
    first = ensure_model(url_request(served, tmp_path / "models"))
    assert first.problems == [] and first.changed and first.switched
    store = ModelStore(tmp_path / "models", "split-demo")
    assert os.readlink(store.current) == f"versions/{first.version}"
    for name in SHARDS:
        assert sha256(store.current / name) == sha256(served.state.root / "a" / name)
    assert (store.current / MANIFEST).is_file() and not any(store.base.joinpath(".staging").iterdir())
    assert sorted(first.hashed_files) == sorted([*SHARDS, "config.json", "tokenizer.json", "tokenizer_config.json"])

    requests_before = len(served.state.log)
    second = ensure_model(url_request(served, tmp_path / "models"))
    assert not second.changed and second.up_to_date and second.version == first.version
    assert second.hashed_files == [] and len(served.state.log) == requests_before


def test_a_changed_file_is_noticed_by_size_or_mtime(served: ModelHTTPServer, tmp_path: Path):
    first = ensure_model(url_request(served, tmp_path / "models"))
    placed = ModelStore(tmp_path / "models", "split-demo").current / SHARDS[1]
    os.utime(placed, ns=(0, 0))
    again = ensure_model(url_request(served, tmp_path / "models"))
    # The placed copy no longer matches its manifest: the set is fetched and verified again.
    assert again.changed and again.problems == [] and again.hashed_files
    assert again.version == first.version


def test_interrupted_download_fails_naming_the_shard_and_resumes(served: ModelHTTPServer, tmp_path: Path):
    size = (served.state.root / "a" / SHARDS[2]).stat().st_size
    served.state.drop_after[SHARDS[2]] = size // 3
    failed = ensure_model(url_request(served, tmp_path / "models"))
    assert len(failed.problems) == 1 and failed.problems[0].startswith(f"{SHARDS[2]}: download incomplete")
    assert ModelStore(tmp_path / "models", "split-demo").current_version() is None

    resumed = ensure_model(url_request(served, tmp_path / "models"))
    assert resumed.problems == [] and resumed.switched
    transfer = next(t for t in resumed.transfers if t["name"] == SHARDS[2])
    assert transfer["resumed_from"] == size // 3
    assert transfer["bytes_transferred"] == size - size // 3
    ranged = [r for r in served.state.log if r.path.endswith(SHARDS[2]) and r.range]
    assert ranged and ranged[-1].range == f"bytes={size // 3}-" and ranged[-1].status == 206


def test_a_dropped_connection_is_retried_within_one_run(served: ModelHTTPServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    paused: list[float] = []
    monkeypatch.setattr(model_download, "pause", paused.append)
    served.state.drop_after[SHARDS[0]] = 100_000
    result = ensure_model(url_request(served, tmp_path / "models", attempts=3))
    assert result.problems == []
    assert next(t for t in result.transfers if t["name"] == SHARDS[0])["attempts"] == 2 and paused == [2.0]


def test_a_full_filesystem_is_not_retried_and_names_the_file(served: ModelHTTPServer, tmp_path: Path):
    # /dev/full: the kernel's own ENOSPC on every write, as a filled model filesystem gives
    (tmp_path / f"{SHARDS[0]}.part").symlink_to("/dev/full")
    remote = RemoteFile(name=SHARDS[0], url=served.url(f"a/{SHARDS[0]}"),
                        size=(served.state.root / "a" / SHARDS[0]).stat().st_size)
    with pytest.raises(FetchError) as failed:
        http_download(remote, tmp_path, {}, timeout=10, attempts=3)
    assert str(failed.value).startswith(f"{SHARDS[0]}: cannot write {tmp_path / SHARDS[0]}.part "
                                        "(No space left on device, [Errno 28]); not retried")
    assert len([r for r in served.state.log if r.path.endswith(SHARDS[0])]) == 1


def place_a(served: ModelHTTPServer, tmp_path: Path) -> tuple[ModelStore, str]:
    first = ensure_model(url_request(served, tmp_path / "models"))
    assert first.problems == []
    return ModelStore(tmp_path / "models", "split-demo"), first.version


def test_wrong_hash_fails_naming_the_shard_and_keeps_the_placed_set(served: ModelHTTPServer, tmp_path: Path):
    store, placed = place_a(served, tmp_path)
    request = url_request(served, tmp_path / "models")
    request.files[1].sha256 = "0" * 64
    result = ensure_model(request)
    assert [p for p in result.problems if "sha256" in p] == [
        f"{SHARDS[1]}: sha256 {sha256(served.state.root / 'a' / SHARDS[1])} does not match the expected {'0' * 64}"]
    assert store.current_version() == placed and not result.switched
    assert not (Path(result.staging_dir) / SHARDS[1]).exists()  # a re-run fetches it again


def test_missing_shard_fails_naming_it(served: ModelHTTPServer, tmp_path: Path):
    store, placed = place_a(served, tmp_path)
    request = url_request(served, tmp_path / "models", attempts=2)
    request.files[1].sha256 = "1" * 64  # a different set, so the placed one does not already match
    (served.state.root / "a" / SHARDS[1]).unlink()
    result = ensure_model(request)
    assert any(p.startswith(f"{SHARDS[1]}: ") and "404" in p for p in result.problems), result.problems
    assert store.current_version() == placed


def test_shard_from_another_set_fails_the_gguf_check(served: ModelHTTPServer, tmp_path: Path):
    store, placed = place_a(served, tmp_path)
    shutil.copy(served.state.root / "b" / SHARDS[1], served.state.root / "a" / SHARDS[1])
    # The profile's hashes are those of the files served: only the headers can tell.
    result = ensure_model(url_request(served, tmp_path / "models"))
    print(result.problems)
    assert any(p.startswith(f"{SHARDS[1]}: tensor ") and "shards from different sets" in p for p in result.problems), \
        result.problems
    assert store.current_version() == placed


def test_not_enough_space_fails_before_downloading(served: ModelHTTPServer, tmp_path: Path):
    free = shutil.disk_usage(tmp_path).free
    result = ensure_model(url_request(served, tmp_path / "models", margin_bytes=free))
    assert len(result.problems) == 1 and result.problems[0].startswith("not enough disk space for the model: ")
    assert gets(served) == [] and not (tmp_path / "models").exists()


def test_check_mode_changes_nothing(served: ModelHTTPServer, tmp_path: Path):
    result = ensure_model(url_request(served, tmp_path / "models"), check_mode=True)
    assert result.changed and result.problems == [] and gets(served) == []
    assert not (tmp_path / "models").exists()


def test_switch_back_and_retention(served: ModelHTTPServer, tmp_path: Path, sets):
    root = tmp_path / "models"
    store, version_a = place_a(served, tmp_path)
    variant = served.state.root / "c"
    shutil.copytree(served.state.root / "a", variant)
    (variant / "tokenizer_config.json").write_text((variant / "tokenizer_config.json").read_text() + "\n")
    version_c = ensure_model(url_request(served, root, "c")).version
    assert store.current_version() == version_c and version_c != version_a

    back = ensure_model(url_request(served, root, "a"))
    assert back.switched and back.bytes_transferred == 0 and store.current_version() == version_a

    (variant / "generation_config.json").write_text("{}")
    request = url_request(served, root, "c")
    request.files.append(RemoteFile("generation_config.json", url=served.url("c/generation_config.json"),
                                    sha256=sha256(variant / "generation_config.json")))
    third = ensure_model(request)
    assert third.problems == [] and third.pruned == [version_c]  # keep_previous=1: a stays, the older c goes
    assert sorted(store.versions()) == sorted([version_a, third.version])


def test_local_source_is_not_hashed_again(sets, tmp_path: Path):
    files = [RemoteFile(name=p.name, local_path=str(p)) for p in sorted(sets["a"].iterdir())]

    def request() -> FetchRequest:
        return FetchRequest(root=str(tmp_path / "m"), name="local", source="local",
                            files=[RemoteFile(**vars(f)) for f in files], gguf_files=SHARDS, margin_bytes=0)

    first = ensure_model(request())
    assert first.problems == [] and first.switched
    second = ensure_model(request())
    assert not second.changed and second.hashed_files == []


def test_a_shard_damaged_after_placing_is_found_though_size_and_mtime_are_kept(sets, tmp_path: Path):
    files = [RemoteFile(name=p.name, local_path=str(p)) for p in sorted(sets["a"].iterdir())]
    placed = ensure_model(FetchRequest(root=str(tmp_path / "m"), name="local", source="local", files=files,
                                       gguf_files=SHARDS, margin_bytes=0))
    current = tmp_path / "m" / "local" / "current"
    assert placed.switched and damaged_files(current, workers=2) == []

    shard = current / SHARDS[1]
    kept = shard.stat()
    with shard.open("r+b") as handle:  # one flipped bit in the middle, as a bad disk block leaves it
        handle.seek(kept.st_size // 2)
        byte = handle.read(1)[0]
        handle.seek(kept.st_size // 2)
        handle.write(bytes([byte ^ 0x01]))
    os.utime(shard, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    (current / "tokenizer_config.json").unlink()

    problems = damaged_files(current, workers=2)
    assert problems[0] == "tokenizer_config.json: missing"
    assert problems[1].startswith(f"{SHARDS[1]}: sha256 ") and f"{sha256(sets['a'] / SHARDS[1])} when it was verified" in problems[1]
    assert len(problems) == 2


def test_local_source_with_a_foreign_shard_is_refused(sets, tmp_path: Path):
    mixed = tmp_path / "mixed"
    shutil.copytree(sets["a"], mixed)
    shutil.copy(sets["b"] / SHARDS[2], mixed / SHARDS[2])
    files = [RemoteFile(name=p.name, local_path=str(p)) for p in sorted(mixed.iterdir())]
    result = ensure_model(FetchRequest(root=str(tmp_path / "m"), name="x", source="local", files=files,
                                       gguf_files=SHARDS, margin_bytes=0))
    assert any(p.startswith(SHARDS[2]) for p in result.problems), result.problems
    assert not (tmp_path / "m" / "x" / "current").exists()


def test_plan_names_the_staging_directory_and_changes_nothing(served: ModelHTTPServer, tmp_path: Path):
    plan = ensure_model(url_request(served, tmp_path / "models"), plan_only=True)
    assert not plan.changed and plan.staging_dir.endswith(f"/split-demo/.staging/{plan.version}")
    assert gets(served) == [] and not (tmp_path / "models").exists()
    ensure_model(url_request(served, tmp_path / "models"))
    again = ensure_model(url_request(served, tmp_path / "models"), plan_only=True)
    assert again.up_to_date and again.staging_dir is None and not again.changed


def test_retention_never_removes_a_version_a_release_pins(tmp_path: Path):
    store = ModelStore(tmp_path / "models", "m")
    for index, version in enumerate(["v1", "v2", "v3"]):
        store.version_dir(version).mkdir(parents=True)
        os.utime(store.version_dir(version), (100 + index, 100 + index))
    store.switch("v3")
    # keep_previous=1 alone would remove v1; a kept service release still serves from it.
    assert store.prune(1, protected=frozenset({"v1"})) == []
    assert store.prune(0, protected=frozenset({"v1"})) == ["v2"]
    assert sorted(store.versions()) == ["v1", "v3"]


def test_a_release_pins_its_version_through_a_symlinked_root_or_a_trailing_slash(tmp_path: Path):
    real = tmp_path / "disk" / "models"
    real.mkdir(parents=True)
    (tmp_path / "models").symlink_to(real)
    store = ModelStore(tmp_path / "models", "m")  # the store through the link, releases by real path
    for version in ("v1", "v2"):
        store.version_dir(version).mkdir(parents=True)
    store.switch("v2")
    pinned = [f"{real}/m/versions/v1/", str(store.current), "", "/elsewhere/m/versions/v9"]
    assert store.pinned_versions(pinned) == {"v1", "v2"}


def test_placing_a_version_current_already_is_keeps_the_current_files(tmp_path: Path):
    # A re-synced source with new mtimes is staged again under the same (content) version id.
    store = ModelStore(tmp_path / "models", "m")
    for directory in (store.staging_dir("v1"), store.version_dir("v0")):
        directory.mkdir(parents=True)
        (directory / "w.gguf").write_text("weights")
    os.rename(store.staging_dir("v1"), store.version_dir("v1"))
    store.switch("v1")
    served = (store.current / "w.gguf").stat().st_ino
    store.staging_dir("v1").mkdir(parents=True)
    (store.staging_dir("v1") / "w.gguf").write_text("weights")
    store.place("v1")
    assert (store.current / "w.gguf").stat().st_ino == served  # the files vLLM has open stay
    assert not store.staging_dir("v1").exists()
    pinned = (store.version_dir("v0") / "w.gguf").stat().st_ino  # a kept release runs v0: kept as well
    store.staging_dir("v0").mkdir(parents=True)
    (store.staging_dir("v0") / "w.gguf").write_text("weights")
    store.place("v0", protected=frozenset({"v0"}))
    assert (store.version_dir("v0") / "w.gguf").stat().st_ino == pinned and not store.staging_dir("v0").exists()
    store.staging_dir("v0").mkdir(parents=True)  # unpinned, v0 is a leftover: the verified copy replaces it
    (store.staging_dir("v0") / "w.gguf").write_text("verified")
    store.place("v0")
    assert (store.version_dir("v0") / "w.gguf").read_text() == "verified"
