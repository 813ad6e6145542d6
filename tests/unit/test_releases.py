from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.releases import (
    ReleaseError, link_target, linked_venvs, mark_verified, prune, releases, rollback, state, switch,
)


def make_release(root: Path, release_id: str, created: float, venv: Path, model: Path | None = None) -> Path:
    path = root / release_id
    path.mkdir(parents=True)
    (path / "release.env").write_text(f"FLEET_SERVE_ARGS='--model {model}'\n")
    os.symlink(venv, path / "venv")
    files = [str(model)] if model else []
    (path / "release.json").write_text(json.dumps({"id": release_id, "created": created, "model_files": files}))
    return path


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    python = tmp_path / "envs" / "vllm-a" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    return python.parent.parent


@pytest.fixture
def root(tmp_path: Path, venv: Path) -> Path:
    root = tmp_path / "releases"
    for index, release_id in enumerate(["aaa", "bbb", "ccc"]):
        make_release(root, release_id, 100.0 + index, venv)
    return root


def test_first_switch_has_no_previous_and_a_second_switch_keeps_the_old_one(root: Path):
    assert switch(root, "aaa") == {"changed": True, "current": "aaa", "previous": None}
    assert switch(root, "bbb")["previous"] == "aaa"
    assert (link_target(root, "current"), link_target(root, "previous")) == ("bbb", "aaa")
    assert (root / "current" / "release.env").read_text().startswith("FLEET_SERVE_ARGS")


def test_switching_to_the_current_release_changes_nothing(root: Path):
    switch(root, "aaa")
    switch(root, "bbb")
    assert switch(root, "bbb")["changed"] is False
    assert link_target(root, "previous") == "aaa"


def test_check_mode_switch_leaves_the_links(root: Path):
    switch(root, "aaa")
    assert switch(root, "bbb", dry_run=True)["changed"] is True
    assert link_target(root, "current") == "aaa"


def test_switch_refuses_a_release_whose_venv_or_model_is_gone(root: Path, venv: Path, tmp_path: Path):
    make_release(root, "ddd", 200.0, tmp_path / "envs" / "deleted")
    with pytest.raises(ReleaseError, match=r"release ddd cannot start: missing venv .*deleted"):
        switch(root, "ddd")
    make_release(root, "eee", 201.0, venv, model=tmp_path / "models" / "x.gguf")
    with pytest.raises(ReleaseError, match=r"missing model file .*x\.gguf"):
        switch(root, "eee")
    with pytest.raises(ReleaseError, match="release zzz does not exist"):
        switch(root, "zzz")
    assert link_target(root, "current") is None


def test_rollback_swaps_current_and_previous_and_marks_the_failed_release(root: Path):
    switch(root, "aaa")
    switch(root, "bbb")
    outcome = rollback(root, reason="readiness: engine died")
    assert outcome["current"] == "aaa" and outcome["rolled_back_from"] == "bbb"
    assert (link_target(root, "current"), link_target(root, "previous")) == ("aaa", "bbb")
    failed = {release.id: release.failed for release in releases(root)}
    assert failed["bbb"] == "readiness: engine died" and failed["aaa"] == ""
    # Switching to it again (a fixed host, the same configuration) clears the mark.
    switch(root, "bbb")
    assert {r.id: r.failed for r in releases(root)}["bbb"] == ""


def test_rollback_without_a_previous_release_fails_and_changes_nothing(root: Path):
    switch(root, "aaa")
    with pytest.raises(ReleaseError, match=r"no previous release .* \(current: aaa\)"):
        rollback(root)
    assert link_target(root, "current") == "aaa"


def test_rollback_refuses_a_previous_release_whose_venv_is_gone(root: Path, tmp_path: Path):
    make_release(root, "old", 50.0, tmp_path / "envs" / "pruned")
    switch(root, "aaa")
    os.replace(root / "current", root / "previous")
    os.symlink("old", root / "previous.tmp")
    os.replace(root / "previous.tmp", root / "previous")
    os.symlink("aaa", root / "current")
    with pytest.raises(ReleaseError, match="cannot roll back to release old: missing venv"):
        rollback(root)
    assert link_target(root, "current") == "aaa"


def test_prune_keeps_the_newest_and_never_current_or_previous(root: Path, venv: Path):
    for index, release_id in enumerate(["ddd", "eee"]):
        make_release(root, release_id, 200.0 + index, venv)
    switch(root, "aaa")  # the oldest is served
    switch(root, "bbb")
    outcome = prune(root, keep=3)
    assert outcome["removed"] == ["ccc", "ddd"]
    assert sorted(r.id for r in releases(root)) == ["aaa", "bbb", "eee"]
    assert venv.joinpath("bin", "python").exists()  # the venv behind the links is untouched
    assert prune(root, keep=3)["changed"] is False


def test_prune_in_check_mode_removes_nothing(root: Path):
    switch(root, "ccc")
    assert prune(root, keep=1, dry_run=True)["removed"] == ["aaa", "bbb"]
    assert len(releases(root)) == 3
    with pytest.raises(ReleaseError, match="at least 1"):
        prune(root, keep=0)


def test_state_lists_releases_oldest_first(root: Path):
    switch(root, "bbb")
    described = state(root)
    assert described["current"] == "bbb" and [r["id"] for r in described["releases"]] == ["aaa", "bbb", "ccc"]


def test_rollback_refuses_a_previous_release_that_failed_unless_allowed(root: Path):
    switch(root, "aaa")
    switch(root, "bbb")
    rollback(root, reason="gate: token 3 differs")  # current aaa, previous bbb (failed)
    with pytest.raises(ReleaseError, match=r"previous release bbb failed before \(gate: token 3 differs\)"):
        rollback(root)
    assert link_target(root, "current") == "aaa"
    assert rollback(root, allow_failed=True)["current"] == "bbb"


def test_a_refused_automatic_rollback_still_marks_the_failed_release(root: Path):
    switch(root, "aaa")
    with pytest.raises(ReleaseError, match="no previous release"):
        rollback(root, reason="readiness: engine died")
    assert {r.id: r.failed for r in releases(root)}["aaa"] == "readiness: engine died"
    assert link_target(root, "current") == "aaa"


def test_described_carries_the_current_release_manifest_and_the_outcome_wins(root: Path):
    from ansible_collections.vllm_fleet.fleet.plugins.module_utils.releases import described

    switch(root, "aaa")
    assert described(root, {})["current_manifest"]["id"] == "aaa"
    planned = described(root, switch(root, "bbb", dry_run=True))  # check mode: links unchanged
    assert planned["current"] == "bbb" and planned["current_manifest"]["id"] == "bbb"
    assert described(root / "missing", {})["current_manifest"] == {}


def test_prune_removes_only_directories_that_are_releases(root: Path, venv: Path):
    """A release root shared with other data (e.g. set to /opt/vllm-fleet, beside envs/) loses none of it."""
    switch(root, "bbb")
    switch(root, "ccc")
    foreign = {"envs": None, "half-made": None, "other-id": {"id": "someone-else"}, "broken": "{not json"}
    for name, manifest in foreign.items():
        (root / name).mkdir()
        (root / name / "keep.txt").write_text("data\n")
        if isinstance(manifest, dict):
            (root / name / "release.json").write_text(json.dumps(manifest))
        elif manifest:
            (root / name / "release.json").write_text(manifest)
    removed = prune(root, keep=1)["removed"]
    assert removed == ["aaa"]
    assert [release.id for release in releases(root)] == ["bbb", "ccc"]
    for name in foreign:
        assert (root / name / "keep.txt").read_text() == "data\n"


def test_reported_manifests_name_extra_env_without_values(root: Path):
    manifest = json.loads((root / "aaa" / "release.json").read_text())
    manifest["tuning"] = {"extra_env": {"HF_TOKEN": "hf_secret", "FLEET_MARK": "1"}, "nccl_proto": "LL"}
    (root / "aaa" / "release.json").write_text(json.dumps(manifest))
    reported = {r["id"]: r for r in state(root)["releases"]}["aaa"]["manifest"]
    assert reported["tuning"] == {"extra_env": ["FLEET_MARK", "HF_TOKEN"], "nccl_proto": "LL"}
    assert "hf_secret" not in json.dumps(state(root))


def test_a_switched_release_is_unverified_until_marked(root: Path):
    switch(root, "aaa")
    assert state(root)["unverified"] is True  # switched, never gated: the next run restarts and gates it
    assert mark_verified(root) == {"changed": True, "verified": "aaa", "unverified": False}
    assert mark_verified(root) == {"changed": False}
    switch(root, "bbb")  # a run that dies here leaves current unverified
    assert (state(root)["verified"], state(root)["unverified"]) == ("aaa", True)
    rollback(root)
    assert state(root)["unverified"] is False


def test_mark_verified_in_check_mode_or_without_current(root: Path):
    with pytest.raises(ReleaseError, match="no current release"):
        mark_verified(root)
    switch(root, "aaa")
    assert mark_verified(root, dry_run=True)["changed"] is True and link_target(root, "verified") is None


def test_prune_never_removes_the_verified_release(root: Path, venv: Path):
    switch(root, "aaa")
    mark_verified(root)
    switch(root, "bbb")
    switch(root, "ccc")  # verified aaa is neither current nor previous, and the oldest
    assert "aaa" not in prune(root, keep=1)["removed"]


def test_linked_venvs_are_resolved_and_a_dry_run_prune_can_leave_some_out(root: Path, venv: Path, tmp_path: Path):
    other = tmp_path / "envs" / "vllm-b"
    other.mkdir()
    make_release(root, "ddd", 200.0, other)
    half_made = root / "eee"  # no release.json yet: still counts, it may become one
    half_made.mkdir()
    os.symlink(tmp_path / "envs" / ".." / "envs" / "vllm-c", half_made / "venv")
    assert linked_venvs(root) == {venv.resolve(), other.resolve(), (tmp_path / "envs" / "vllm-c").resolve()}
    assert other.resolve() not in linked_venvs(root, ignoring=frozenset({"ddd"}))
    assert linked_venvs(tmp_path / "absent") == set()
