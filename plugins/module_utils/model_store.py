"""Versioned model sets on a host: hashing, the manifest, atomic placement and retention.

Layout under <root>/<name>/:
  versions/<version>/    one verified set (GGUF shards, config.json, tokenizer) + MANIFEST
  current -> versions/<version>   switched with a rename, only after the set is verified
  .staging/<version>/    downloads in progress (same filesystem, so placing is a rename)

The manifest records each file's size, mtime and sha256: a set whose files still have the
recorded size and mtime is not hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

MANIFEST = ".vllm-fleet-manifest.json"
CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while read := handle.readinto(buffer):
            digest.update(view[:read])  # hashlib releases the GIL here: threads hash in parallel
    return digest.hexdigest()


def sha256_files(paths: list[Path], workers: int) -> dict[str, str]:
    """sha256 of each path (by file name), several files at a time."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(paths) or 1))) as pool:
        return dict(zip((p.name for p in paths), pool.map(sha256_file, paths)))


def stat_of(path: Path) -> FileStat:
    info = path.stat()
    return FileStat(info.st_size, info.st_mtime_ns)


def version_id(hashes: dict[str, str]) -> str:
    """A set's name: derived from its files and their hashes, so the same set always lands in the same place."""
    lines = "".join(f"{name} {sha}\n" for name, sha in sorted(hashes.items()))
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


def read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def write_manifest(directory: Path, manifest: dict) -> None:
    temporary = directory / f"{MANIFEST}.tmp"
    temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(temporary, directory / MANIFEST)


def manifest_for(directory: Path, hashes: dict[str, str], extra: dict) -> dict:
    files = {}
    for name, sha in sorted(hashes.items()):
        stat = stat_of(directory / name)
        files[name] = {"size": stat.size, "mtime_ns": stat.mtime_ns, "sha256": sha}
    return {"files": files, "verified_at": int(time.time()), **extra}


def unchanged_since_manifest(directory: Path, manifest: dict | None, names: list[str]) -> bool:
    """True when every name is in the manifest and still has the recorded size and mtime."""
    if not manifest:
        return False
    recorded = manifest.get("files", {})
    for name in names:
        entry = recorded.get(name)
        path = directory / name
        if entry is None or not path.is_file():
            return False
        if stat_of(path) != FileStat(entry["size"], entry["mtime_ns"]):
            return False
    return True


@dataclass
class ModelStore:
    root: Path
    name: str

    @property
    def base(self) -> Path:
        return self.root / self.name

    @property
    def current(self) -> Path:
        return self.base / "current"

    def version_dir(self, version: str) -> Path:
        return self.base / "versions" / version

    def staging_dir(self, version: str) -> Path:
        return self.base / ".staging" / version

    def current_version(self) -> str | None:
        try:
            target = os.readlink(self.current)
        except OSError:
            return None
        return Path(target).name

    def versions(self) -> list[str]:
        """Placed versions, the one current longest ago first."""
        directory = self.base / "versions"
        if not directory.is_dir():
            return []
        return [p.name for p in sorted(directory.iterdir(), key=lambda p: p.stat().st_mtime_ns) if p.is_dir()]

    def place(self, version: str, protected: frozenset[str] = frozenset()) -> None:
        """Move a verified staging set to versions/<version> (a rename on one filesystem).

        A version id names its content, so when current or a protected version already is
        versions/<version> (a re-synced source with new mtimes), that one stays and the staged copy
        goes: what a running or pinned service reads is never removed. Any other directory there
        is an unverified leftover of an earlier run and is replaced.
        """
        target = self.version_dir(version)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and (version == self.current_version() or version in protected):
            shutil.rmtree(self.staging_dir(version))
            return
        if target.exists():
            shutil.rmtree(target)
        os.rename(self.staging_dir(version), target)

    def pinned_versions(self, model_dirs: list[str]) -> frozenset[str]:
        """The versions of this store that these directories are, compared as resolved paths (a
        symlinked model root, a trailing slash or a path through current all name the same one)."""
        versions = os.path.realpath(self.base / "versions")
        pinned = set()
        for model_dir in model_dirs:
            resolved = os.path.realpath(model_dir) if model_dir else ""
            if resolved and os.path.dirname(resolved) == versions:
                pinned.add(os.path.basename(resolved))
        return frozenset(pinned)

    def switch(self, version: str) -> None:
        """Point current at versions/<version> atomically (rename of a new link over the old one)."""
        link = self.base / ".current.new"
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(f"versions/{version}", link)
        os.replace(link, self.current)
        os.utime(self.version_dir(version))  # the time a set was last made current orders retention

    def prune(self, keep_previous: int, protected: frozenset[str] = frozenset()) -> list[str]:
        """Remove placed versions beyond the current one and the keep_previous newest others.

        Versions in `protected` (those a kept service release pins) are never removed.
        """
        current = self.current_version()
        others = [v for v in self.versions() if v != current and v not in protected]
        doomed = others[: max(0, len(others) - keep_previous)]
        for version in doomed:
            shutil.rmtree(self.version_dir(version))
        return doomed


def damaged_files(directory: Path, workers: int) -> list[str]:
    """What in a placed set differs from its manifest: a file gone, another size, another sha256.

    Hashes every file (a flipped bit keeps size and mtime), so it costs a read of the whole set.
    """
    manifest = read_manifest(directory)
    if manifest is None:
        return [f"{directory / MANIFEST}: missing or unreadable, so nothing says what was verified"]
    recorded: dict[str, dict] = manifest.get("files", {})
    problems, present = [], []
    for name, entry in sorted(recorded.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif path.stat().st_size != entry["size"]:
            problems.append(f"{name}: {path.stat().st_size} bytes, {entry['size']} when it was verified")
        else:
            present.append(path)
    for name, sha in sorted(sha256_files(present, workers).items()):
        if sha != recorded[name]["sha256"]:
            problems.append(f"{name}: sha256 {sha}, {recorded[name]['sha256']} when it was verified")
    return problems
