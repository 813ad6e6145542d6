"""Bring a model set onto a host: plan, check space, fetch, verify, place, switch, prune.

The previously placed set (and a service reading it through ``current``) is never touched until
the new set is complete, every sha256 matches and the GGUF headers form one consistent split set.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .gguf_files import CONFIG_FILE, TOKENIZER_FILES, read_shard_header, split_set_problems
from .model_download import (
    FetchError, RemoteFile, Transfer, check_free_space, copy_local, git_blob_sha1, head_size, hf_download,
    http_download,
)
from .model_store import (
    ModelStore, manifest_for, read_manifest, sha256_files, unchanged_since_manifest, version_id, write_manifest,
)


@dataclass
class FetchRequest:
    root: str
    name: str
    source: str                      # url | hf | local | staged (files already copied into staging)
    files: list[RemoteFile]
    gguf_files: list[str]
    expected_architecture: str | None = None
    expected_tensor_count: int | None = None
    validate_gguf: bool = True
    keep_previous: int = 1
    protected_versions: frozenset[str] = frozenset()
    # The model directories the kept service releases run (their manifests' model_dir).
    pinned_model_dirs: tuple[str, ...] = ()
    margin_bytes: int = 2**30
    hash_workers: int = 4
    attempts: int = 3
    timeout: float = 60.0
    http_headers: dict[str, str] = field(default_factory=dict)
    hf_token: str | None = None
    hf_endpoint: str | None = None


@dataclass
class FetchResult:
    changed: bool = False
    version: str | None = None
    previous_version: str | None = None
    switched: bool = False
    up_to_date: bool = False
    staging_dir: str | None = None
    model_dir: str = ""
    needed_bytes: int = 0
    free_bytes: int = 0
    transfers: list[dict] = field(default_factory=list)
    bytes_transferred: int = 0
    hashed_files: list[str] = field(default_factory=list)
    hash_seconds: float = 0.0
    pruned: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def expected_identity(remote: RemoteFile) -> str | None:
    return remote.sha256 or (f"git:{remote.git_blob_sha1}" if remote.git_blob_sha1 else None)


def local_fingerprint(files: list[RemoteFile]) -> str:
    """For a local source without hashes: names, sizes and mtimes, so an unchanged source is not hashed again."""
    stats = []
    for remote in files:
        info = Path(remote.local_path or "").stat()
        stats.append([remote.name, info.st_size, info.st_mtime_ns])
    return hashlib.sha256(json.dumps(sorted(stats)).encode()).hexdigest()[:16]


def planned_version(request: FetchRequest) -> tuple[str | None, str | None]:
    """The version the request names (from expected hashes) and, for a hashless local source, its fingerprint."""
    identities = {r.name: expected_identity(r) for r in request.files}
    if all(identities.values()):
        return version_id(identities), None  # type: ignore[arg-type]
    if request.source == "local":
        return None, local_fingerprint(request.files)
    return None, None


def placed_version_matching(store: ModelStore, request: FetchRequest, version: str | None,
                            fingerprint: str | None) -> str | None:
    """A placed, still-unchanged version that is the requested set, if there is one."""
    names = [r.name for r in request.files]
    candidates = [version] if version else list(reversed(store.versions()))
    for candidate in candidates:
        directory = store.version_dir(candidate)
        manifest = read_manifest(directory)
        if fingerprint and (manifest or {}).get("source_fingerprint") != fingerprint:
            continue
        if directory.is_dir() and unchanged_since_manifest(directory, manifest, names):
            return candidate
    return None


def fetch_one(remote: RemoteFile, request: FetchRequest, staging: Path) -> Transfer:
    if (staging / remote.name).is_file():
        return Transfer(remote.name)  # complete from an earlier run; verified below like the rest
    if request.source == "url":
        return http_download(remote, staging, request.http_headers, request.timeout, request.attempts)
    if request.source == "hf":
        return hf_download(remote, staging, request.hf_token, request.hf_endpoint)
    if request.source == "local":
        return copy_local(remote, staging)
    raise FetchError(f"{remote.name}: not staged in {staging}")


def fill_sizes(request: FetchRequest) -> None:
    for remote in request.files:
        if remote.size is None and remote.url:
            remote.size = head_size(remote.name, remote.url, request.http_headers, request.timeout,
                                    request.attempts)
        elif remote.size is None and remote.local_path and Path(remote.local_path).is_file():
            remote.size = Path(remote.local_path).stat().st_size


def verify_staging(request: FetchRequest, staging: Path, result: FetchResult) -> dict[str, str]:
    """Hash every file in parallel and compare; remove a file whose hash is wrong so a re-run fetches it again."""
    started = time.perf_counter()
    hashes = sha256_files([staging / r.name for r in request.files], request.hash_workers)
    result.hash_seconds = round(time.perf_counter() - started, 3)
    result.hashed_files = sorted(hashes)
    for remote in request.files:
        path = staging / remote.name
        if remote.size is not None and path.stat().st_size != remote.size:
            result.problems.append(f"{remote.name}: {path.stat().st_size} bytes, expected {remote.size}")
        if remote.sha256 and hashes[remote.name] != remote.sha256.lower():
            result.problems.append(f"{remote.name}: sha256 {hashes[remote.name]} does not match the expected {remote.sha256}")
            path.unlink()
        elif remote.git_blob_sha1 and git_blob_sha1(path) != remote.git_blob_sha1:
            result.problems.append(f"{remote.name}: git blob id does not match the hub's {remote.git_blob_sha1}")
            path.unlink()
    return hashes


def set_problems(request: FetchRequest, staging: Path) -> list[str]:
    names = {r.name for r in request.files}
    problems = [f"{name}: listed in gguf_files but not in the source's files" for name in request.gguf_files
                if name not in names]
    if CONFIG_FILE not in names:
        problems.append(f"{CONFIG_FILE} is not among the model's files (vLLM reads it beside the GGUF)")
    if not names & set(TOKENIZER_FILES):
        problems.append(f"no tokenizer among the model's files: expected one of {', '.join(TOKENIZER_FILES)}")
    if problems or not request.validate_gguf:
        return problems
    headers = [read_shard_header(staging / name) for name in request.gguf_files]
    return split_set_problems(headers, request.expected_architecture, request.expected_tensor_count)


def ensure_model(request: FetchRequest, check_mode: bool = False, plan_only: bool = False) -> FetchResult:
    store = ModelStore(Path(request.root), request.name)
    result = FetchResult(previous_version=store.current_version(), model_dir=str(store.current))
    version, fingerprint = planned_version(request)
    placed = placed_version_matching(store, request, version, fingerprint)
    if placed:
        result.version = placed
        result.up_to_date = placed == result.previous_version
        if not result.up_to_date and not check_mode and not plan_only:
            store.switch(placed)
        result.switched = result.changed = not result.up_to_date and not plan_only
        return result

    staging = store.staging_dir(version or f"local-{fingerprint or 'unknown'}")
    result.version, result.staging_dir = version, str(staging)
    if plan_only:
        return result
    try:
        fill_sizes(request)
    except FetchError as error:
        result.problems.append(str(error))
        return result
    space = check_free_space(staging, request.files, request.margin_bytes)
    result.needed_bytes, result.free_bytes = space.needed, space.free
    result.problems += space.problems
    result.changed = True
    if result.problems or check_mode:
        return result

    staging.mkdir(parents=True, exist_ok=True)
    for remote in request.files:
        try:
            transfer = fetch_one(remote, request, staging)
        except FetchError as error:
            result.problems.append(str(error))
            continue
        result.transfers.append(asdict(transfer))
        result.bytes_transferred += transfer.bytes_transferred
    if result.problems:
        return result
    hashes = verify_staging(request, staging, result)
    if result.problems:
        return result
    result.problems += set_problems(request, staging)
    if result.problems:
        return result

    shutil.rmtree(staging / ".hf", ignore_errors=True)  # huggingface_hub's own bookkeeping
    result.version = version or version_id(hashes)
    extra = {"source": request.source, "gguf_files": request.gguf_files, "source_fingerprint": fingerprint}
    write_manifest(staging, manifest_for(staging, hashes, extra))
    if staging != store.staging_dir(result.version):
        staging.rename(store.staging_dir(result.version))
    protected = request.protected_versions | store.pinned_versions(list(request.pinned_model_dirs))
    store.place(result.version, protected)
    store.switch(result.version)
    result.switched = True
    result.pruned = store.prune(request.keep_previous, protected)
    return result
