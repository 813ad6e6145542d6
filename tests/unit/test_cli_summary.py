from __future__ import annotations

import pytest

from vllm_fleet.cli import extra_vars, parse_args
from vllm_fleet.summary import (EXIT_FAILED, EXIT_OK, EXIT_ROLLED_BACK, EXIT_UNREACHABLE, RunSummary, group_hosts)


def event(kind: str, host: str, task: str, action: str = "", res: dict | None = None, **data) -> dict:
    return {"event": f"runner_on_{kind}",
            "event_data": {"host": host, "task": task, "resolved_action": action, "res": res or {}, **data}}


def test_a_roll_that_stopped_at_a_rolled_back_host():
    summary = RunSummary.for_hosts(["a", "b", "c"])
    for item in [
        event("ok", "a", "Make the release current", "vllm_release", {"current": "r2", "previous": "r1", "changed": True}),
        event("ok", "a", "Wait until vLLM serves", "vllm_ready", {"changed": False}),
        event("ok", "b", "Make the release current", "vllm_release", {"current": "r9", "previous": "r1", "changed": True}),
        event("failed", "b", "Wait until vLLM serves", "vllm_ready", {"msg": "unit in auto-restart"}),
        event("ok", "b", "Make the previous release current again", "vllm_release",
              {"current": "r1", "previous": "r9", "rolled_back_from": "r9", "changed": True}),
        event("ok", "b", "Wait until vLLM serves", "vllm_ready", {}),
        event("ok", "b", "Note that the host serves its previous release again", "ansible.builtin.set_fact",
              {"ansible_facts": {"vllm_service_rolled_back": True}}),
        event("failed", "b", "Stop the roll with the cause", "ansible.builtin.fail", {"msg": "release r9 failed and was rolled back"}),
    ]:
        summary.feed(item)
    states = {o["host"]: o["state"] for o in summary.as_dict()}
    assert states == {"a": "serving", "b": "rolled back", "c": "not reached"}
    assert summary.hosts["b"].release == "r1" and "rolled back" in summary.hosts["b"].message
    assert summary.exit_code(2) == EXIT_ROLLED_BACK


def test_ignored_failures_do_not_count_and_unreachable_does():
    summary = RunSummary.for_hosts(["a", "b"])
    summary.feed(event("failed", "a", "Stop vllm", "systemd_service", {"msg": "no unit"}, ignore_errors=True))
    summary.feed(event("ok", "a", "Wait until vLLM serves", "vllm_ready"))
    assert summary.exit_code(0) == EXIT_OK
    summary.feed(event("unreachable", "b", "Gathering Facts", "setup", {"msg": "ssh: connect refused"}))
    assert summary.hosts["b"].state == "unreachable" and summary.exit_code(4) == EXIT_UNREACHABLE
    summary.feed(event("failed", "a", "Check the previous release", "vllm_release", {"msg": "failed before"}))
    assert summary.exit_code(2) == EXIT_FAILED


def test_status_report_and_verify_figures():
    summary = RunSummary.for_hosts(["a"])
    summary.feed(event("ok", "a", "Describe the service", "ansible.builtin.set_fact",
                       {"ansible_facts": {"vllm_service_status_report": {
                           "release": "r1", "previous": None, "active": "active", "healthy": True}}}))
    summary.feed(event("ok", "a", "Gate", "vllm_bench", {"decode": {"tok_s_tpot": 9.0}, "levels": []}))
    summary.feed(event("ok", "a", "Benchmark", "vllm_bench", {"decode": {"tok_s_tpot": 140.2}, "levels": [{}]}))
    outcome = summary.hosts["a"]
    assert (outcome.state, outcome.release, outcome.tok_s) == ("serving", "r1", 140.2)
    summary.feed(event("ok", "a", "Describe the service", "set_fact", {"ansible_facts": {
        "vllm_service_status_report": {"release": "r1", "active": "activating", "healthy": False}}}))
    assert summary.hosts["a"].state == "activating"


def test_events_without_a_host_are_ignored():
    summary = RunSummary()
    summary.feed({"event": "playbook_on_stats", "event_data": {}})
    summary.feed({"event": "runner_on_ok", "event_data": {"task": "x"}})
    assert summary.hosts == {} and summary.exit_code(0) == EXIT_OK


def test_group_hosts_walks_children_in_order():
    inventory = {"all": {"children": ["vllm_hosts", "ungrouped"]},
                 "vllm_hosts": {"hosts": ["a"], "children": ["rack2"]}, "rack2": {"hosts": ["b", "a"]}}
    assert group_hosts(inventory, "vllm_hosts") == ["a", "b"]
    assert group_hosts(inventory, "missing") == []


def test_extra_vars_parse_json_values_and_refuse_garbage():
    assert extra_vars(["a=1", "b=x", 'c={"k": [1]}'], "25%", apply=True) == {
        "a": 1, "b": "x", "c": {"k": [1]}, "fleet_roll_serial": "25%", "fleet_roll_apply": True}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        extra_vars(["novalue"], None)


def test_a_rollback_that_did_not_bring_the_host_back_is_a_failure_not_a_rollback():
    summary = RunSummary.for_hosts(["a"])
    summary.feed(event("ok", "a", "Check the previous release can be served", "vllm_release",
                       {"current": "r1", "previous": "r2", "rolled_back_from": "r2", "changed": True}))
    summary.feed(event("failed", "a", "Wait until vLLM serves", "vllm_ready", {"msg": "not ready"}))
    assert summary.hosts["a"].state == "failed" and summary.exit_code(2) == EXIT_FAILED


def test_only_the_vllm_hosts_are_reported_when_known():
    summary = RunSummary.for_hosts(["a"])
    summary.feed(event("ok", "lb", "Gathering Facts", "setup"))
    assert list(summary.hosts) == ["a"]
    unknown = RunSummary.for_hosts([])
    unknown.feed(event("ok", "lb", "Gathering Facts", "setup"))
    assert list(unknown.hosts) == ["lb"]


def test_json_output_never_overwrites_another_file(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text("ERROR 12-04 10:00:00 [core.py:1] RuntimeError: boom\n")
    with pytest.raises(SystemExit):
        parse_args(["--json", str(log), "triage"])
    assert log.read_text().startswith("ERROR 12-04")
    earlier = tmp_path / "result.json"
    earlier.write_text('{"command": "status"}\n')
    assert parse_args(["--json", str(earlier), "status"]).json == earlier
    assert parse_args(["--json", str(tmp_path / "new.json"), "status"]).json == tmp_path / "new.json"
