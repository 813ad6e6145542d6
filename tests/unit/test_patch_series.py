"""The patch mechanism with GNU patch on a stand-in site-packages."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import STATE_FILE, PatchError, apply_series, installed_version, load_series

ORIGINAL = "def arch_map():\n    return {\n        'qwen3': 'qwen3',\n    }\n"
PATCHED_ONCE = ORIGINAL.replace("        'qwen3': 'qwen3',\n", "        'qwen3': 'qwen3',\n        'glm_moe_dsa': 'glm-dsa',\n")


def make_diff(tmp: Path, relative: str, before: str, after: str) -> str:
    a, b = tmp / "a" / relative, tmp / "b" / relative
    for path, text in ((a, before), (b, after)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = subprocess.run(["diff", "-u", f"a/{relative}", f"b/{relative}"], cwd=tmp, capture_output=True, text=True, check=False)
    return result.stdout


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    (site / "fake_plugin").mkdir(parents=True)
    (site / "fake_plugin" / "arch.py").write_text(ORIGINAL)
    (site / "fake_plugin-0.0.5.dist-info").mkdir()
    return site


def write_series(root: Path, version: str, patches: dict[str, str]) -> None:
    series_dir = root / "fake-plugin" / version
    series_dir.mkdir(parents=True, exist_ok=True)
    for name, text in patches.items():
        (series_dir / name).write_text(text)
    (series_dir / "series").write_text("# order matters\n" + "\n".join(patches) + "\n")


@pytest.fixture
def series_root(tmp_path: Path) -> Path:
    root = tmp_path / "patches"
    write_series(root, "0.0.5", {"0001-map-glm-dsa.patch": make_diff(tmp_path / "d1", "fake_plugin/arch.py",
                                                                     ORIGINAL, PATCHED_ONCE)})
    return root


def test_version_comes_from_dist_info(site: Path):
    assert installed_version(site, "fake-plugin") == "0.0.5"
    assert installed_version(site, "other") is None


def test_applies_once_then_changes_nothing(site: Path, series_root: Path):
    first = apply_series(site, series_root, "fake-plugin")
    assert first.changed and first.action == "applied"
    assert (site / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE
    state = json.loads((site / STATE_FILE).read_text())
    assert state["fake-plugin"]["series_id"] == first.series_id
    second = apply_series(site, series_root, "fake-plugin")
    assert not second.changed and second.action == "already applied"
    assert (site / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE


def test_check_mode_changes_nothing(site: Path, series_root: Path):
    result = apply_series(site, series_root, "fake-plugin", check_mode=True)
    assert result.changed and result.action == "would be applied"
    assert (site / "fake_plugin" / "arch.py").read_text() == ORIGINAL
    assert not (site / STATE_FILE).exists()


def test_a_failing_patch_leaves_every_file_untouched(site: Path, series_root: Path, tmp_path: Path):
    good = (series_root / "fake-plugin" / "0.0.5" / "0001-map-glm-dsa.patch").read_text()
    bad = make_diff(tmp_path / "d2", "fake_plugin/arch.py", "something else entirely\n", "changed\n")
    write_series(series_root, "0.0.5", {"0001-map-glm-dsa.patch": good, "0002-mismatched.patch": bad})
    with pytest.raises(PatchError, match="applying 0002-mismatched.patch failed"):
        apply_series(site, series_root, "fake-plugin")
    assert (site / "fake_plugin" / "arch.py").read_text() == ORIGINAL, "0001 must not stay applied alone"
    assert not (site / STATE_FILE).exists()


def test_version_without_series_is_refused(site: Path, series_root: Path):
    (site / "fake_plugin-0.0.5.dist-info").rename(site / "fake_plugin-0.0.6.dist-info")
    with pytest.raises(PatchError, match=r"fake-plugin 0.0.6 is installed, but the patch series exists only for 0.0.5"):
        apply_series(site, series_root, "fake-plugin")
    assert (site / "fake_plugin" / "arch.py").read_text() == ORIGINAL


def test_a_new_series_replaces_the_old_one(site: Path, series_root: Path, tmp_path: Path):
    old = apply_series(site, series_root, "fake-plugin")
    patched_twice = ORIGINAL.replace("'qwen3': 'qwen3',", "'qwen3': 'qwen3',\n        'deepseek_v3': 'deepseek2',")
    write_series(series_root, "0.0.5", {"0001-other.patch": make_diff(tmp_path / "d3", "fake_plugin/arch.py",
                                                                      ORIGINAL, patched_twice)})
    (series_root / "fake-plugin" / "0.0.5" / "0001-map-glm-dsa.patch").unlink()
    new = apply_series(site, series_root, "fake-plugin")
    assert new.changed and new.action == f"replaced {old.series_id}"
    assert (site / "fake_plugin" / "arch.py").read_text() == patched_twice


def test_found_applied_by_hand_is_recorded_without_rewriting(site: Path, series_root: Path):
    (site / "fake_plugin" / "arch.py").write_text(PATCHED_ONCE)
    result = apply_series(site, series_root, "fake-plugin")
    assert result.action == "recorded (found applied)"
    assert (site / "fake_plugin" / "arch.py").read_text() == PATCHED_ONCE


def test_series_listing_a_missing_patch_is_refused(series_root: Path):
    (series_root / "fake-plugin" / "0.0.5" / "series").write_text("0009-gone.patch\n")
    with pytest.raises(PatchError, match="lists 0009-gone.patch, which does not exist"):
        load_series(series_root, "fake-plugin", "0.0.5")
