"""Apply a patch series to an installed Python package, all or nothing, idempotently.

Layout on disk: <series_root>/<distribution>/<version>/series lists patch files (one per line,
'#' comments), each a unified diff relative to site-packages (applied with `patch -p1`). The
series applies to a scratch copy of the files it touches first; only when every patch applied
there are the results moved into site-packages, so a failure leaves nothing half-patched. What
was applied is recorded in site-packages (vllm-fleet-patches.json) with the patch texts, so a
later series can first take the old one back out.

Standard library only (runs on the managed host); needs GNU patch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "vllm-fleet-patches.json"
DIFF_TARGET = re.compile(r"^\+\+\+ (?:b/)?(?P<path>\S+)", re.MULTILINE)
DIFF_SOURCE = re.compile(r"^--- (?:a/)?(?P<path>\S+)", re.MULTILINE)


class PatchError(Exception):
    """The series cannot be applied; nothing was changed."""


@dataclass
class Series:
    distribution: str
    version: str
    patches: list[tuple[str, str]]  # (file name, text)

    @property
    def series_id(self) -> str:
        digest = hashlib.sha256()
        for name, text in self.patches:
            digest.update(name.encode() + b"\0" + text.encode() + b"\0")
        return f"{self.distribution}-{self.version}-{digest.hexdigest()[:12]}"

    def touched_files(self) -> list[str]:
        return files_touched(self.patches)


def files_touched(patches: list[tuple[str, str]]) -> list[str]:
    """site-packages-relative paths the diffs name (old and new sides)."""
    paths: set[str] = set()
    for _name, text in patches:
        for pattern in (DIFF_SOURCE, DIFF_TARGET):
            paths.update(m["path"] for m in pattern.finditer(text) if m["path"] != "/dev/null")
    return sorted(paths)


@dataclass
class ApplyResult:
    distribution: str
    version: str
    series_id: str
    changed: bool
    action: str  # "applied", "already applied", "replaced <old id>", "would apply", ...
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_version(site_packages: Path, distribution: str) -> str | None:
    """Version of an installed distribution, from its *.dist-info directory name."""
    wanted = canonical(distribution)
    for entry in site_packages.glob("*.dist-info"):
        name, _dash, version = entry.name[: -len(".dist-info")].rpartition("-")
        if canonical(name) == wanted:
            return version
    return None


def available_versions(series_root: Path, distribution: str) -> list[str]:
    package_dir = series_root / distribution
    return sorted(p.name for p in package_dir.iterdir() if (p / "series").is_file()) if package_dir.is_dir() else []


def load_series(series_root: Path, distribution: str, version: str) -> Series:
    series_dir = series_root / distribution / version
    if not (series_dir / "series").is_file():
        versions = available_versions(series_root, distribution)
        raise PatchError(
            f"{distribution} {version} is installed, but the patch series exists only for "
            f"{', '.join(versions) or 'no version'} ({series_root / distribution}); refusing to run an unpatched "
            f"{distribution} {version}. Pin {distribution} to a version with a series, or write one.")
    names = [line.split("#", 1)[0].strip() for line in (series_dir / "series").read_text().splitlines()]
    patches = []
    for name in filter(None, names):
        path = series_dir / name
        if not path.is_file():
            raise PatchError(f"{series_dir / 'series'} lists {name}, which does not exist")
        patches.append((name, path.read_text()))
    if not patches:
        raise PatchError(f"{series_dir / 'series'} lists no patches")
    return Series(distribution, version, patches)


def read_state(site_packages: Path) -> dict:
    path = site_packages / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def write_state(site_packages: Path, state: dict) -> None:
    atomic_write(site_packages / STATE_FILE, json.dumps(state, indent=2, sort_keys=True).encode())


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def run_patch(workdir: Path, name: str, text: str, reverse: bool = False, dry_run: bool = False) -> None:
    # --forward makes patch skip (and fail on) a hunk that looks already done, in either
    # direction; --batch alone would silently flip the direction instead (and never prompt).
    argv = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "--reject-file=-", "-d", str(workdir)]
    if reverse:
        argv.append("--reverse")
    if dry_run:
        argv.append("--dry-run")
    # subprocess, not AnsibleModule.run_command: library code with no module object (vllm_patch and
    # the unit tests both reach it through patched_env and apply_series).
    result = subprocess.run(  # pylint: disable=ansible-bad-function
        argv, input=text, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        direction = "reversing" if reverse else "applying"
        raise PatchError(f"{direction} {name} failed: {(result.stdout + result.stderr).strip()}")


def stage(site_packages: Path, files: list[str], scratch: Path) -> None:
    for relative in files:
        source = site_packages / relative
        if source.is_file():
            target = scratch / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def is_applied(site_packages: Path, series: Series) -> bool:
    """True when the whole series reverses cleanly: its changes are all in place."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        stage(site_packages, series.touched_files(), scratch)
        try:
            for name, text in reversed(series.patches):
                run_patch(scratch, name, text, reverse=True)
        except PatchError:
            return False
    return True


def patched_copy(site_packages: Path, files: list[str], undo: list[tuple[str, str]],
                 apply: list[tuple[str, str]], scratch: Path) -> None:
    """Stage files, reverse `undo` (newest first) and apply `apply` in the scratch copy."""
    stage(site_packages, files, scratch)
    for name, text in reversed(undo):
        run_patch(scratch, name, text, reverse=True)
    for name, text in apply:
        run_patch(scratch, name, text)


def install_files(site_packages: Path, scratch: Path, files: list[str]) -> None:
    for relative in files:
        patched = scratch / relative
        target = site_packages / relative
        if patched.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
            atomic_write(target, patched.read_bytes(), mode)
        elif target.exists():
            target.unlink()  # a patch deleted the file


def apply_series(site_packages: Path, series_root: Path, distribution: str, check_mode: bool = False) -> ApplyResult:
    version = installed_version(site_packages, distribution)
    if version is None:
        raise PatchError(f"{distribution} is not installed in {site_packages}")
    series = load_series(series_root, distribution, version)
    state = read_state(site_packages)
    previous = recorded_series(state, distribution)
    result = ApplyResult(distribution, version, series.series_id, False, "already applied", series.touched_files())
    if is_applied(site_packages, series):
        if previous and previous.series_id == series.series_id:
            return result
        result.changed, result.action = not check_mode, "recorded (found applied)"
        if not check_mode:
            record(site_packages, state, series)
        return result
    # Take a different, still applied series of the same version back out first.
    undo = previous.patches if previous and previous.version == version and is_applied(site_packages, previous) else []
    files = sorted(set(series.touched_files()) | set(files_touched(undo)))
    with tempfile.TemporaryDirectory() as tmp:
        patched_copy(site_packages, files, undo, series.patches, Path(tmp))
        result.changed = True
        result.action = f"replaced {previous.series_id}" if undo and previous else "applied"
        result.files = files
        if check_mode:
            result.action = "would be " + result.action
            return result
        install_files(site_packages, Path(tmp), files)
    record(site_packages, state, series)
    return result


def recorded_series(state: dict, distribution: str) -> Series | None:
    entry = state.get(distribution)
    return Series(distribution, entry["version"], [tuple(p) for p in entry["patches"]]) if entry else None


def record(site_packages: Path, state: dict, series: Series) -> None:
    state[series.distribution] = {"version": series.version, "series_id": series.series_id,
                                  "patches": series.patches}
    write_state(site_packages, state)


# A venv per (pinned packages + patch series): the pinned venv stays as pip installed it, and each
# set of series gets its own hard-linked clone, patched there. A release links the venv it runs, so
# rolling back to a release restores the code it ran, byte for byte.
ENV_MARK = "vllm-fleet-env.json"
STAGING_SUFFIX = ".staging"


@dataclass
class PatchedEnv:
    env: str
    changed: bool
    action: str  # "pinned venv", "built", "present", "would build", "pinned venv restored"
    series_ids: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    not_installed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def site_packages_of(env: Path) -> Path:
    found = sorted(env.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise PatchError(f"{env} is not a venv with one site-packages (found {len(found)})")
    return found[0]


def series_for(site_packages: Path, series_root: Path, distributions: list[str]) -> tuple[list[Series], list[str]]:
    """The series the installed versions need, and the distributions not installed."""
    wanted, missing = [], []
    for distribution in distributions:
        version = installed_version(site_packages, distribution)
        if version is None:
            missing.append(distribution)
        else:
            wanted.append(load_series(series_root, distribution, version))
    return wanted, missing


def link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(source, target)


def clone_env(base: Path, target: Path, final: Path) -> None:
    """A copy of the venv at `target` made of hard links (patching replaces files, never writes
    into them), its scripts pointed at `final`, where it will be renamed."""
    shutil.copytree(base, target, symlinks=True, copy_function=link_or_copy)
    old, new = str(base).encode(), str(final).encode()
    for script in (target / "bin").iterdir():
        if script.is_symlink() or not script.is_file() or script.stat().st_size > 1 << 20:
            continue
        data = script.read_bytes()
        if old in data:
            atomic_write(script, data.replace(old, new), script.stat().st_mode & 0o777)


def read_mark(env: Path) -> dict:
    try:
        return json.loads((env / ENV_MARK).read_text())
    except (OSError, ValueError):
        return {}


def restore_pinned(site_packages: Path, check_mode: bool) -> bool:
    """Take out series an earlier toolkit version applied to the pinned venv in place."""
    state = read_state(site_packages)
    if not state:
        return False
    if check_mode:
        return True
    for distribution in sorted(state):
        series = recorded_series(state, distribution)
        if series and is_applied(site_packages, series):
            files = series.touched_files()
            with tempfile.TemporaryDirectory() as tmp:
                patched_copy(site_packages, files, series.patches, [], Path(tmp))
                install_files(site_packages, Path(tmp), files)
    (site_packages / STATE_FILE).unlink()
    return True


def patched_env(base: Path, clone: Path, series_root: Path, distributions: list[str],
                check_mode: bool = False) -> PatchedEnv:
    """The venv to run: the pinned one when no installed distribution has a series to apply, else
    `clone` (named by the caller after the series set), a clone of it with the series applied,
    built beside it under a staging name and renamed when complete, so an interrupted build is
    started over and never run."""
    if not base.is_dir():
        if check_mode and distributions:
            return PatchedEnv(str(clone), True, "would build (the pinned venv is not installed yet)")
        if check_mode:
            return PatchedEnv(str(base), False, "pinned venv (not installed yet)")
        raise PatchError(f"the pinned venv {base} does not exist")
    pinned_site = site_packages_of(base)
    restored = restore_pinned(pinned_site, check_mode)
    series, missing = series_for(pinned_site, series_root, distributions)
    if not series:
        return PatchedEnv(str(base), restored, "pinned venv restored" if restored else "pinned venv",
                          not_installed=missing)
    ids = [s.series_id for s in series]
    result = PatchedEnv(str(clone), False, "present", ids, not_installed=missing)
    if read_mark(clone).get("series_ids") == ids:
        return result
    result.changed = True
    if check_mode:
        result.action = "would build"
        return result
    staging = clone.with_name(clone.name + STAGING_SUFFIX)
    shutil.rmtree(staging, ignore_errors=True)
    clone_env(base, staging, clone)
    site = site_packages_of(staging)
    result.results = [apply_series(site, series_root, s.distribution).as_dict() for s in series]
    atomic_write(staging / ENV_MARK, json.dumps({"base": str(base), "series_ids": ids}, indent=1).encode())
    if clone.exists():  # a clone left without its mark (made by hand, or damaged): replaced whole
        shutil.rmtree(clone)
    os.rename(staging, clone)
    result.action = "built"
    return result


def unlinked_clones(envs_root: Path, linked: set[Path]) -> list[Path]:
    """The patched clones under envs_root that nothing in `linked` (resolved venv paths) runs, and
    the staging directories that interrupted builds left.

    Only directories this module built count: a mark naming the pinned venv whose name, plus "-p",
    starts theirs, or a staging name made of a pinned venv's name beside it, "-p" and the suffix. A
    pinned venv or anything else is never listed. Called after the play's build, so no build is
    running in a staging directory.
    """
    if not envs_root.is_dir():
        return []
    entries = [e for e in sorted(envs_root.iterdir()) if e.is_dir() and not e.is_symlink()]
    pinned = {e.name for e in entries if not (e / ENV_MARK).exists()}
    clones = []
    for entry in entries:
        if entry.name.endswith(STAGING_SUFFIX):
            if any(entry.name.startswith(name + "-p") for name in pinned):
                clones.append(entry)
            continue
        base = read_mark(entry).get("base")
        if isinstance(base, str) and entry.name.startswith(Path(base).name + "-p") and entry.resolve() not in linked:
            clones.append(entry)
    return clones
