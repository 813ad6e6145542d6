"""The test harness's own logic: which playbook tasks changed, where a run's time went."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, changed_role_tasks, starts_from_golden_image
from tests.harness import golden, phases, timings


def event(kind: str, role: str, task: str, changed: bool = False, duration: float = 0.5, host: str = "h1") -> dict:
    return {"event": kind, "event_data": {"host": host, "role": role, "task": task, "duration": duration,
                                          "res": {"changed": changed}}}


def test_changed_tasks_names_only_changes_of_the_converged_roles():
    events = [event("runner_on_ok", "python_env", "Install the pinned packages"),
              event("runner_on_ok", "model", "Place the set", changed=True, host="h2"),
              event("runner_on_ok", "vllm_service", "Render the unit", changed=True),
              event("runner_on_skipped", "python_env", "Create the venv", changed=True)]
    assert golden.changed_tasks(events) == ["h2: model : Place the set"]


def test_changed_role_tasks_reads_ansible_playbook_output():
    output = """
TASK [python_env : Create the venv] ********************************************
ok: [vllm-fleet-molecule]

TASK [model : Download, verify and place the model set] ************************
changed: [vllm-fleet-molecule]

TASK [vllm_service : Render the unit] ******************************************
changed: [vllm-fleet-molecule]

RUNNING HANDLER [python_env : Sync] ********************************************
changed: [vllm-fleet-molecule -> localhost] => (item=a)
changed: [vllm-fleet-molecule -> localhost] => (item=b)
"""
    assert changed_role_tasks(output, ("python_env", "model")) == [
        "model : Download, verify and place the model set", "python_env : Sync"]
    assert changed_role_tasks(output, ("vllm",)) == []


def test_slow_tasks_keep_long_ok_and_failed_tasks():
    events = [event("runner_on_ok", "python_env", "Install", duration=95.2),
              event("runner_on_failed", "vllm_service", "Wait", duration=12.0),
              event("runner_on_ok", "verify", "Stat", duration=0.2),
              event("runner_on_skipped", "model", "Skip", duration=30)]
    assert [(row["task"], row["seconds"]) for row in timings.slow_tasks(events)] == [("Install", 95.2), ("Wait", 12.0)]


def test_phase_table_sums_repeated_phases_and_groups_tests_by_area(tmp_path: Path):
    stamps = tmp_path / "phases.tsv"
    stamps.write_text("bootstrap: apt\t100.0\t160.5\nbootstrap: apt\t200.0\t201.0\npytest\t201.0\t1201.0\n")
    rows = {row.name: (row.seconds, row.count) for row in phases.read_phases(stamps)}
    assert rows == {"bootstrap: apt": (61.5, 2), "pytest": (1000.0, 1)}
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite>'
                     '<testcase classname="tests.e2e.test_site" name="test_a" time="400.5"/>'
                     '<testcase classname="tests.e2e.test_site" name="test_b" time="10"/>'
                     '<testcase classname="tests.unit.test_x" name="test_c" time="0.5"/>'
                     '</testsuite></testsuites>')
    areas = [(row.name, row.seconds, row.count) for row in phases.by_area(phases.read_tests(junit))]
    assert areas == [("tests.e2e.test_site", 410.5, 2), ("tests.unit", 0.5, 1)]


@pytest.mark.skipif(not (REPO_ROOT / ".git").exists(), reason="the golden key lists the checkout's files with git")
def test_golden_key_changes_with_an_input(tmp_path: Path, monkeypatch):
    first = golden.key()
    assert first == golden.key() and len(first) == 16
    monkeypatch.setattr(golden, "KEY_INPUTS", [*golden.KEY_INPUTS, "README.md"])
    assert golden.key() != first


def test_a_capture_is_pending_only_while_the_named_process_lives(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(golden, "PENDING", tmp_path / "capture-pending")
    assert not golden.capture_pending()
    golden.PENDING.write_text(f"{os.getpid()}\n")
    assert golden.capture_pending()
    finished = subprocess.Popen(["true"])
    finished.wait()
    golden.PENDING.write_text(str(finished.pid))
    assert not golden.capture_pending()
    golden.PENDING.write_text("not a pid")
    assert not golden.capture_pending()


def test_the_wait_for_a_pending_capture_ends_when_it_settles(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(golden, "PENDING", tmp_path / "capture-pending")
    golden.PENDING.write_text(str(os.getpid()))
    threading.Timer(0.3, golden.capture_settled).start()
    started = time.monotonic()
    golden.wait_while_capture_pending(timeout=30, poll=0.05)
    assert 0.25 < time.monotonic() - started < 5 and not golden.PENDING.exists()
    golden.PENDING.write_text(str(os.getpid()))  # never settled: the wait gives up at its timeout
    started = time.monotonic()
    golden.wait_while_capture_pending(timeout=0.2, poll=0.05)
    assert time.monotonic() - started < 5


def test_golden_image_users_run_after_the_rest_of_their_lane():
    ids = ["tests/fleet/test_rolling.py::test_a", "tests/integration/test_lint.py::test_b",
           "tests/integration/test_molecule.py::test_c", "tests/unit/test_x.py::test_d", "tests/e2e/test_site.py::e"]
    assert sorted(ids, key=starts_from_golden_image) == [
        "tests/integration/test_lint.py::test_b", "tests/unit/test_x.py::test_d", "tests/e2e/test_site.py::e",
        "tests/fleet/test_rolling.py::test_a", "tests/integration/test_molecule.py::test_c"]
