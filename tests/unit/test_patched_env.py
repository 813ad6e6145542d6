"""A venv per patch series set: the pinned venv stays as installed, each series set runs in a
hard-linked clone of it, built under a staging name (plugins/module_utils/patch_series.patched_env)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import (
    ENV_MARK, STAGING_SUFFIX, STATE_FILE, PatchError, apply_series, patched_env, unlinked_clones,
)
from tests.unit.test_patch_series import ORIGINAL, PATCHED_ONCE, series_root  # noqa: F401 (a fixture)  # pylint: disable=unused-import

SITE = "lib/python3.11/site-packages"


def tree_digest(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file() and not path.is_symlink()}


@pytest.fixture
def pinned(tmp_path: Path) -> Path:
    env = tmp_path / "envs" / "vllm-cpu-0123456789"
    site = env / SITE
    (site / "fake_plugin").mkdir(parents=True)
    (site / "fake_plugin" / "arch.py").write_text(ORIGINAL)
    (site / "fake_plugin" / "other.py").write_text("VALUE = 1\n")
    (site / "fake_plugin-0.0.5.dist-info").mkdir()
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to("/usr/bin/python3")
    (env / "bin" / "vllm").write_text(f"#!{env}/bin/python\nimport vllm\n")
    (env / "bin" / "vllm").chmod(0o755)
    return env


def clone_of(pinned: Path, tag: str = "aaaaaaaaaaaa") -> Path:
    return pinned.with_name(f"{pinned.name}-p{tag}")


def test_the_clone_carries_the_series_and_the_pinned_venv_stays_byte_for_byte(pinned: Path, series_root: Path):
    before = tree_digest(pinned)
    result = patched_env(pinned, clone_of(pinned), series_root, ["fake-plugin", "not-installed"])
    clone = Path(result.env)
    assert result.changed and result.action == "built" and clone == clone_of(pinned)
    assert result.not_installed == ["not-installed"] and len(result.series_ids) == 1
    assert (clone / SITE / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE
    assert tree_digest(pinned) == before and not (pinned / SITE / STATE_FILE).exists()
    # Untouched files are shared, the patched one is a file of its own.
    assert os.path.samefile(clone / SITE / "fake_plugin" / "other.py", pinned / SITE / "fake_plugin" / "other.py")
    assert not os.path.samefile(clone / SITE / "fake_plugin" / "arch.py", pinned / SITE / "fake_plugin" / "arch.py")
    # Scripts point at the clone; links stay links.
    assert (clone / "bin" / "vllm").read_text().startswith(f"#!{clone}/bin/python\n")
    assert (pinned / "bin" / "vllm").read_text().startswith(f"#!{pinned}/bin/python\n")
    assert os.readlink(clone / "bin" / "python") == "/usr/bin/python3"
    assert not clone.with_name(clone.name + STAGING_SUFFIX).exists()


def test_a_present_clone_is_left_alone_and_check_mode_builds_nothing(pinned: Path, series_root: Path):
    assert patched_env(pinned, clone_of(pinned, "bbbbbbbbbbbb"), series_root, ["fake-plugin"], check_mode=True).changed
    assert not clone_of(pinned, "bbbbbbbbbbbb").exists()
    patched_env(pinned, clone_of(pinned), series_root, ["fake-plugin"])
    marked = (clone_of(pinned) / ENV_MARK).stat().st_mtime_ns
    again = patched_env(pinned, clone_of(pinned), series_root, ["fake-plugin"])
    assert not again.changed and again.action == "present" and again.env == str(clone_of(pinned))
    assert (clone_of(pinned) / ENV_MARK).stat().st_mtime_ns == marked


def test_no_series_runs_the_pinned_venv(pinned: Path, series_root: Path):
    result = patched_env(pinned, clone_of(pinned), series_root, [])
    assert result.env == str(pinned) and not result.changed and result.action == "pinned venv"
    assert not clone_of(pinned).exists()


def test_an_interrupted_build_is_started_over_and_never_used(pinned: Path, series_root: Path):
    staging = clone_of(pinned).with_name(clone_of(pinned).name + STAGING_SUFFIX)
    (staging / SITE / "fake_plugin").mkdir(parents=True)
    (staging / SITE / "fake_plugin" / "arch.py").write_text("half written")
    result = patched_env(pinned, clone_of(pinned), series_root, ["fake-plugin"])
    assert result.action == "built" and not staging.exists()
    assert (clone_of(pinned) / SITE / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE
    # A clone without its mark (its build was cut before the rename, or it was damaged) is rebuilt.
    (clone_of(pinned) / ENV_MARK).unlink()
    (clone_of(pinned) / SITE / "fake_plugin" / "arch.py").write_text("damaged")
    assert patched_env(pinned, clone_of(pinned), series_root, ["fake-plugin"]).action == "built"
    assert (clone_of(pinned) / SITE / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE


def test_series_an_older_toolkit_applied_in_place_are_taken_out_of_the_pinned_venv(pinned: Path, series_root: Path):
    apply_series(pinned / SITE, series_root, "fake-plugin")  # the in-place patching of earlier versions
    assert (pinned / SITE / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE
    result = patched_env(pinned, clone_of(pinned), series_root, [])
    assert result.changed and result.action == "pinned venv restored" and result.env == str(pinned)
    assert (pinned / SITE / "fake_plugin" / "arch.py").read_text() == ORIGINAL
    assert not (pinned / SITE / STATE_FILE).exists()


def test_a_missing_pinned_venv_is_refused_outside_check_mode(tmp_path: Path, series_root: Path):
    missing = tmp_path / "envs" / "absent"
    with pytest.raises(PatchError, match="does not exist"):
        patched_env(missing, clone_of(missing), series_root, ["fake-plugin"])
    assert patched_env(missing, clone_of(missing), series_root, ["fake-plugin"], check_mode=True).changed


def test_unlinked_clones_are_the_marked_clones_nothing_runs_and_abandoned_staging(pinned: Path, series_root: Path):
    running, unused = clone_of(pinned, "aaaaaaaaaaaa"), clone_of(pinned, "bbbbbbbbbbbb")
    for clone in (running, unused):
        patched_env(pinned, clone, series_root, ["fake-plugin"])
    envs = pinned.parent
    (envs / f"{pinned.name}-pmadebyhand").mkdir()  # no mark: not ours
    abandoned = envs / f"{pinned.name}-pcccccccccccc{STAGING_SUFFIX}"  # an interrupted build of another set
    abandoned.mkdir()
    (envs / f"elsewhere-p1{STAGING_SUFFIX}").mkdir()  # no pinned venv of that name: not ours
    foreign = envs / "another-tool-env"
    foreign.mkdir()
    (foreign / ENV_MARK).write_text(f'{{"base": "{pinned}", "series_ids": []}}')  # a mark, not a clone's name
    (envs / "link-to-unused").symlink_to(unused)
    assert unlinked_clones(envs, {running.resolve()}) == [unused, abandoned]
    assert unlinked_clones(envs, {running.resolve(), unused.resolve()}) == [abandoned]
    assert unlinked_clones(envs / "absent", set()) == []
