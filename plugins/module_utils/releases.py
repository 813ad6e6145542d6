"""Versioned releases of a vLLM service, and the `current` / `previous` links the unit follows.

A release is one directory, `<root>/<id>/`, holding what a configuration of the service needs:
its environment file (arguments, tuning), a `venv` link to the interpreter's venv and a
`release.json` manifest. `<root>/current` names the release the unit runs, `<root>/previous`
the one it ran before. Every link change is a rename(2) over the old link, so a reader sees the
old or the new target, never none.

Nothing here deletes the release being served or the one to fall back to.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "release.json"
FAILED_MARK = "FAILED"
# verified: the release that last passed the readiness gate (and the coherence gate) on this host.
LINKS = ("current", "previous", "verified")


class ReleaseError(Exception):
    """A release operation cannot be done; the message names the release and the reason."""


@dataclass
class Release:
    id: str
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    failed: str = ""

    @property
    def created(self) -> float:
        return float(self.manifest.get("created", 0) or self.path.stat().st_mtime)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "path": str(self.path), "created": self.created, "failed": self.failed,
                "manifest": without_env_values(self.manifest)}


def without_env_values(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with tuning.extra_env as names only (values may be secrets; manifests written
    before the role recorded names only hold the values)."""
    tuning = manifest.get("tuning")
    if not isinstance(tuning, dict) or not isinstance(tuning.get("extra_env"), dict):
        return manifest
    return {**manifest, "tuning": {**tuning, "extra_env": sorted(tuning["extra_env"])}}


def link_target(root: Path, name: str) -> str | None:
    """The release id a link names, or None when the link does not exist."""
    link = root / name
    if not link.is_symlink():
        return None
    return Path(os.readlink(link)).name


def point(root: Path, name: str, release_id: str) -> None:
    """Make root/name a link to release_id, replacing an old link atomically."""
    temporary = root / f".{name}.{os.getpid()}.tmp"
    if temporary.is_symlink() or temporary.exists():
        temporary.unlink()
    os.symlink(release_id, temporary)
    os.replace(temporary, root / name)


def load(root: Path, release_id: str) -> Release:
    path = root / release_id
    if not path.is_dir():
        raise ReleaseError(f"release {release_id} does not exist under {root}")
    manifest_file = path / MANIFEST
    manifest = json.loads(manifest_file.read_text()) if manifest_file.is_file() else {}
    failed_file = path / FAILED_MARK
    failed = failed_file.read_text().strip() if failed_file.is_file() else ""
    return Release(release_id, path, manifest, failed)


def is_release(path: Path) -> bool:
    """A directory the toolkit made as a release: its release.json parses and names the directory.

    Anything else under the root (a venv directory, another tool's data, a half-made release
    whose manifest was never written) is not listed, so it is never pruned.
    """
    if not path.is_dir() or path.is_symlink() or path.name.startswith("."):
        return False
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("id") == path.name


def releases(root: Path) -> list[Release]:
    """Every release directory under root, oldest first."""
    if not root.is_dir():
        return []
    found = [load(root, entry.name) for entry in root.iterdir() if is_release(entry)]
    return sorted(found, key=lambda release: (release.created, release.id))


def missing_parts(release: Release) -> list[str]:
    """What a release needs to start that is not there (its venv's python, its model files)."""
    missing = []
    python = release.path / "venv" / "bin" / "python"
    if not python.exists():
        missing.append(f"venv {os.readlink(release.path / 'venv') if (release.path / 'venv').is_symlink() else '?'} "
                       "(its python does not exist)")
    for model_file in release.manifest.get("model_files", []):
        if not Path(model_file).exists():
            missing.append(f"model file {model_file}")
    return missing


def state(root: Path) -> dict[str, Any]:
    """The links and releases; `unverified` when current is not the release that last passed the
    gate (a run that switched and died before its restart, or before the gate passed)."""
    current, verified = link_target(root, "current"), link_target(root, "verified")
    return {"current": current, "previous": link_target(root, "previous"), "verified": verified,
            "unverified": current is not None and current != verified,
            "releases": [release.as_dict() for release in releases(root)]}


def described(root: Path, outcome: dict[str, Any]) -> dict[str, Any]:
    """The links and releases after an action (its outcome wins in check mode), with the manifest
    of the release current then, which is what the service runs."""
    result = {**state(root), **outcome}
    result["current_manifest"] = next((release["manifest"] for release in result["releases"]
                                       if release["id"] == result["current"]), {})
    return result


def switch(root: Path, release_id: str, dry_run: bool = False) -> dict[str, Any]:
    """Serve release_id next: previous <- current, current <- release_id. No change if already current."""
    release = load(root, release_id)
    current = link_target(root, "current")
    if current == release_id:
        return {"changed": False, "current": current, "previous": link_target(root, "previous")}
    missing = missing_parts(release)
    if missing:
        raise ReleaseError(f"release {release_id} cannot start: missing {', '.join(missing)}")
    if not dry_run:
        if current:
            point(root, "previous", current)
        point(root, "current", release_id)
        clear_failed(release)
    return {"changed": True, "current": release_id, "previous": current or link_target(root, "previous")}


def rollback(root: Path, reason: str = "", dry_run: bool = False, allow_failed: bool = False) -> dict[str, Any]:
    """Serve the previous release again; the two links swap, so a second rollback undoes the first.

    reason, when given, is recorded in the release rolled back from (its FAILED mark). A previous
    release that carries such a mark (it failed and was rolled back from) is refused unless
    allow_failed.
    """
    current = link_target(root, "current")
    previous = link_target(root, "previous")
    if current and reason and not dry_run:
        # Marked first: a refused rollback still records why the current release is not trusted.
        (root / current / FAILED_MARK).write_text(reason.strip() + "\n")
    if not previous:
        raise ReleaseError(f"no previous release under {root} to roll back to (current: {current or 'none'})")
    target = load(root, previous)
    if target.failed and not allow_failed:
        raise ReleaseError(f"the previous release {previous} failed before ({target.failed}); "
                           "not rolling back to it (allow it explicitly to try again)")
    missing = missing_parts(target)
    if missing:
        raise ReleaseError(f"cannot roll back to release {previous}: missing {', '.join(missing)}")
    if not dry_run:
        point(root, "current", previous)
        if current:
            point(root, "previous", current)
        clear_failed(target)
    return {"changed": True, "current": previous, "previous": current, "rolled_back_from": current}


def mark_verified(root: Path, dry_run: bool = False) -> dict[str, Any]:
    """Record that the current release passed the gate (the verified link names it)."""
    current = link_target(root, "current")
    if current is None:
        raise ReleaseError(f"no current release under {root} to mark verified")
    if link_target(root, "verified") == current:
        return {"changed": False}
    if not dry_run:
        point(root, "verified", current)
    return {"changed": True, "verified": current, "unverified": False}


def clear_failed(release: Release) -> None:
    mark = release.path / FAILED_MARK
    if mark.is_file():
        mark.unlink()


def prune(root: Path, keep: int, dry_run: bool = False) -> dict[str, Any]:
    """Remove the oldest releases beyond `keep`, never the current or the previous one."""
    if keep < 1:
        raise ReleaseError(f"keep must be at least 1, got {keep}")
    protected = {link_target(root, name) for name in LINKS} - {None}
    candidates = [release for release in releases(root) if release.id not in protected]
    room = max(keep - len(protected), 0)
    doomed = candidates[: max(len(candidates) - room, 0)]
    if not dry_run:
        for release in doomed:
            remove_tree(release.path)
    return {"changed": bool(doomed), "removed": [release.id for release in doomed]}


def linked_venvs(root: Path, ignoring: frozenset[str] = frozenset()) -> set[Path]:
    """The venvs (resolved) that directories under root link, releases or half-made ones alike,
    except the directories named in `ignoring` (releases a dry-run prune would remove)."""
    if not root.is_dir():
        return set()
    links = (entry / "venv" for entry in root.iterdir() if entry.name not in ignoring)
    return {Path(os.path.realpath(link)) for link in links if link.is_symlink()}


def remove_tree(path: Path) -> None:
    """Delete a release directory; rmtree unlinks the venv link inside, never follows it."""
    shutil.rmtree(path)
