"""Fault injection on the deployed test host: each fault either ends in a recovered, ready
service (cleanup) or in a play that fails within seconds naming the root cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import SERVICE_ONLY, PlayRun, on_host, run_playbook, service_state
from tests.harness import faults

pytestmark = pytest.mark.slow

CLEANUP_TASK = "Stop leftover GPU and vLLM processes, remove stale shared memory"
PRECHECK_TASK = "Check that nothing outside the unit holds its GPUs or port"
GATE_TASK = "Wait until vLLM serves, failing fast on a crash"
FAKE_DEVICES = "/run/fake-gpu"
HOLD = f"{FAKE_DEVICES}/hold.py"


def internal_address() -> str:
    return on_host("hostname -I").split()[0]


def inject(unit: str, command: str, user: str = "root") -> int:
    """Start a transient unit on the host; returns its main PID."""
    on_host(f"systemd-run --quiet --unit={unit} --uid={user} --property=KillMode=process {command}")
    pid = on_host(f"for _ in $(seq 50); do pid=$(systemctl show {unit} --property=MainPID --value); "
                  f"[ \"$pid\" != 0 ] && break; sleep 0.1; done; echo $pid")
    assert pid != "0", on_host(f"journalctl -u {unit} --no-pager | tail -20", check=False)
    return int(pid)


def alive(pid: int) -> bool:
    return on_host(f"test -d /proc/{pid} && echo yes || true") == "yes"


def report(name: str, run: PlayRun) -> None:
    print(f"\n[{name}] play rc={run.rc} in {run.seconds:.1f} s")


@pytest.fixture(autouse=True)
def clean_injections():
    yield
    on_host("systemctl stop 'fault-*' 2>/dev/null; systemctl reset-failed 'fault-*' 2>/dev/null; "
            f"rm -rf {FAKE_DEVICES} /dev/shm/nccl-fault* /dev/shm/psm_fault*", check=False)


def fake_gpu() -> str:
    """A fake GPU device node and a script that holds a file open: `python3 HOLD <path>`."""
    on_host(f"mkdir -p {FAKE_DEVICES} && touch {FAKE_DEVICES}/nvidia0 {FAKE_DEVICES}/nvidiactl && "
            f"echo 'import sys, time; f = open(sys.argv[1]); time.sleep(600)' > {HOLD}")
    return f"{FAKE_DEVICES}/nvidia0"


# One restart for what the cleanup must stop and what it must leave alone, side by side.
def test_our_leftovers_are_cleaned_and_nothing_else(deployed: PlayRun, tmp_path: Path):
    # An engine core of the service user outside the unit: what a SIGKILLed manual run leaves.
    orphan = inject("fault-orphan", "bash -c 'exec -a VLLM::EngineCore sleep 600'", user="vllm")
    on_host("head -c 1M /dev/zero > /dev/shm/nccl-fault-1 && head -c 1M /dev/zero > /dev/shm/psm_fault2")
    device = fake_gpu()
    holder = inject("fault-device", f"python3 {HOLD} {device}", user="vllm")
    # Another team's vLLM on the same host (root's, outside the unit, holding none of its GPUs) and
    # the persistence daemon the driver role enables (holding the device nodes): neither is ours.
    foreign = inject("fault-foreign", "bash -c 'exec -a VLLM::EngineCore sleep 600'")
    daemon = inject("fault-persistenced", f"bash -c 'exec -a /usr/bin/nvidia-persistenced python3 {HOLD} {device}'")
    run = run_playbook(tmp_path, "playbooks/restart.yml", vllm_service_cleanup_device_glob=f"{FAKE_DEVICES}/nvidia*")
    report("orphan VLLM::EngineCore + stale shm + device holder", run)
    assert run.rc == 0, run.output[-5000:]
    cleanup = run.task_result(CLEANUP_TASK)
    assert orphan in cleanup["terminated"] + cleanup["killed"]
    assert not alive(orphan)
    assert {"/dev/shm/nccl-fault-1", "/dev/shm/psm_fault2"} <= set(cleanup["removed_shm_files"])
    found = [h for h in cleanup["holders"] if h["pid"] == holder]
    assert found and f"holds {device}" in found[0]["reasons"]
    assert not alive(holder)
    assert alive(foreign) and alive(daemon)
    assert not {foreign, daemon} & {h["pid"] for h in cleanup["holders"]}
    assert run.task_result(GATE_TASK)["completion_tokens"] > 0
    assert service_state()[0] == "active"
    faults.record("orphan_engine", survived="recovered", seconds=run.seconds,
                  message=f"restart stopped pids {sorted(cleanup['terminated'] + cleanup['killed'])}, removed "
                          f"{len(cleanup['removed_shm_files'])} stale shm files; another user's vLLM and "
                          "nvidia-persistenced left running")


def test_foreign_gpu_holder_is_refused_before_the_unit_is_stopped(deployed: PlayRun, tmp_path: Path):
    device = fake_gpu()
    squatter = inject("fault-gpu", f"python3 {HOLD} {device}")
    running = service_state()
    refused = run_playbook(tmp_path, "playbooks/restart.yml", vllm_service_cleanup_device_glob=f"{FAKE_DEVICES}/nvidia*")
    assert refused.rc != 0
    message = refused.task_result(PRECHECK_TASK)["msg"]
    assert f"pid {squatter} (root:" in message and f"holds {device}" in message
    assert service_state() == running == ("active", running[1]), "the unit must not be stopped"
    assert alive(squatter)
    faults.record("foreign_gpu_holder", survived="refused before any change", seconds=refused.seconds,
                  message=message.splitlines()[0])


def test_port_holder_outside_the_scope_is_refused_then_forced(deployed: PlayRun, tmp_path: Path):
    on_host("systemctl stop vllm")
    squatter = inject("fault-port", f"python3 -m http.server 8000 --bind {internal_address()}")
    refused = run_playbook(tmp_path / "refused", "playbooks/restart.yml")
    report("port held by root", refused)
    assert refused.rc != 0
    message = refused.task_result(PRECHECK_TASK)["msg"]
    assert "refusing to stop 1 process(es) outside the cleanup scope" in message
    assert f"pid {squatter} (root: /usr/bin/python3 -m http.server 8000" in message and "listens on port 8000" in message
    assert alive(squatter), "nothing outside the scope may be killed without force"

    forced = run_playbook(tmp_path / "forced", "playbooks/restart.yml", vllm_service_cleanup_force=True)
    assert forced.rc == 0, forced.output[-5000:]
    assert not alive(squatter)
    assert service_state()[0] == "active"
    faults.record("foreign_port_holder", survived="refused before any change", seconds=refused.seconds,
                  message=message.splitlines()[0] + "; vllm_service_cleanup_force: true stops it")


def test_check_mode_kills_nothing(deployed: PlayRun, tmp_path: Path):
    orphan = inject("fault-orphan", "bash -c 'exec -a VLLM::Worker_TP0 sleep 600'", user="vllm")
    result = run_playbook(tmp_path, "playbooks/restart.yml", cmdline="--check")
    assert alive(orphan)
    cleanup = result.task_result(CLEANUP_TASK)
    assert orphan in [h["pid"] for h in cleanup["holders"]] and cleanup["killed"] == [] == cleanup["terminated"]


def test_crash_loop_fails_fast_with_the_root_cause(deployed: PlayRun, tmp_path: Path):
    # Without the rollback the unit is left crash-looping, as the triage playbook below needs it
    # (tests/fleet covers the rollback).
    broken = run_playbook(tmp_path / "broken", cmdline=SERVICE_ONLY, vllm_service_extra_args=["--no-such-flag"],
                          vllm_service_rollback_on_failure=False)
    report("crash loop (bad argument)", broken)
    assert broken.rc != 0
    gate = broken.task_result(GATE_TASK)
    print(f"[crash loop] gate failed after {gate['seconds']:.1f} s: {gate['msg']}")
    assert "vllm did not become ready" in gate["msg"]
    assert "[config_or_tokenizer]" in gate["msg"] and "--no-such-flag" in gate["msg"]
    assert gate["triage"]["class"] == "config_or_tokenizer"

    triaged = run_playbook(tmp_path / "triage", "playbooks/triage.yml")
    assert triaged.rc == 0, triaged.output[-3000:]
    found = triaged.task_result("Read the journal and name the root cause")
    assert found["class"] == "config_or_tokenizer" and "--no-such-flag" in found["root_cause"]
    assert "[config_or_tokenizer] api_server.py: error: unrecognized arguments: --no-such-flag" in triaged.output

    restored = run_playbook(tmp_path / "restored", cmdline=SERVICE_ONLY)
    assert restored.rc == 0, restored.output[-5000:]
    faults.record("crash_loop", survived="failed clearly", seconds=gate["seconds"], message=gate["msg"],
                  triage_class=gate["triage"]["class"])
    assert service_state()[0] == "active"
