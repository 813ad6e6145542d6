"""Fault injection on the deployed test host: each fault either ends in a recovered, ready
service (cleanup) or in a play that fails within seconds naming the root cause."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils import vllm_triage

from tests.e2e.conftest import SERVICE_ONLY, PlayRun, on_host, run_playbook, service_state
from tests.conftest import REPO_ROOT
from tests.e2e.test_reboot import SERVE_TIMEOUT, served_completion, wait_until_served
from tests.harness import faults

pytestmark = pytest.mark.slow

CLEANUP_TASK = "Stop leftover GPU and vLLM processes, remove stale shared memory"
PRECHECK_TASK = "Check that nothing outside the unit holds its GPUs or port"
GATE_TASK = "Wait until vLLM serves, failing fast on a crash"
RELOAD_TASK = "Reload systemd for the changed unit"
RULES = REPO_ROOT / "files" / "triage" / "rules.json"
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


# One restart for what the cleanup must stop, what it must refuse to stop and what it must leave
# alone, side by side: refused first (nothing stopped), then forced.
def test_our_leftovers_are_cleaned_a_port_holder_refused_then_forced_and_nothing_else(deployed: PlayRun, tmp_path: Path):
    on_host("systemctl stop vllm")
    # An engine core of the service user outside the unit: what a SIGKILLed manual run leaves.
    orphan = inject("fault-orphan", "bash -c 'exec -a VLLM::EngineCore sleep 600'", user="vllm")
    on_host("head -c 1M /dev/zero > /dev/shm/nccl-fault-1 && head -c 1M /dev/zero > /dev/shm/psm_fault2")
    device = fake_gpu()
    holder = inject("fault-device", f"python3 {HOLD} {device}", user="vllm")
    # Another team's vLLM on the same host (root's, outside the unit, holding none of its GPUs) and
    # the persistence daemon the driver role enables (holding the device nodes): neither is ours.
    foreign = inject("fault-foreign", "bash -c 'exec -a VLLM::EngineCore sleep 600'")
    daemon = inject("fault-persistenced", f"bash -c 'exec -a /usr/bin/nvidia-persistenced python3 {HOLD} {device}'")
    # Root's server on the unit's port: outside the scope, so stopped only with force.
    squatter = inject("fault-port", f"python3 -m http.server 8000 --bind {internal_address()}")
    glob = {"vllm_service_cleanup_device_glob": f"{FAKE_DEVICES}/nvidia*"}

    refused = run_playbook(tmp_path / "refused", "playbooks/restart.yml", **glob)
    report("port held by root", refused)
    assert refused.rc != 0
    message = refused.task_result(PRECHECK_TASK)["msg"]
    assert "refusing to stop 1 process(es) outside the cleanup scope" in message
    assert f"pid {squatter} (root: /usr/bin/python3 -m http.server 8000" in message and "listens on port 8000" in message
    assert all(alive(pid) for pid in (squatter, orphan, holder)), "nothing may be stopped before the refusal"

    run = run_playbook(tmp_path / "forced", "playbooks/restart.yml", vllm_service_cleanup_force=True, **glob)
    report("forced: orphan VLLM::EngineCore + stale shm + device holder + port holder", run)
    assert run.rc == 0, run.output[-5000:]
    cleanup = run.task_result(CLEANUP_TASK)
    stopped = cleanup["terminated"] + cleanup["killed"]
    assert orphan in stopped and squatter in stopped
    assert not alive(orphan) and not alive(squatter)
    assert {"/dev/shm/nccl-fault-1", "/dev/shm/psm_fault2"} <= set(cleanup["removed_shm_files"])
    found = [h for h in cleanup["holders"] if h["pid"] == holder]
    assert found and f"holds {device}" in found[0]["reasons"]
    assert not alive(holder)
    assert alive(foreign) and alive(daemon)
    assert not {foreign, daemon} & {h["pid"] for h in cleanup["holders"]}
    assert run.task_result(GATE_TASK)["completion_tokens"] > 0
    assert service_state()[0] == "active"
    with pytest.raises(KeyError):  # the unit did not change: no daemon-reload (it can time out on a busy host)
        run.task_result(RELOAD_TASK)
    faults.record("orphan_engine", survived="recovered", seconds=run.seconds,
                  message=f"restart stopped pids {sorted(stopped)}, removed "
                          f"{len(cleanup['removed_shm_files'])} stale shm files; another user's vLLM and "
                          "nvidia-persistenced left running")
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


# ----------------------------------------------------------------------------- faults at run time


def unit_pids() -> set[int]:
    return {int(pid) for pid in on_host("pgrep -u vllm || true").split()}


def restarts() -> int:
    return int(on_host("systemctl show vllm --property=NRestarts --value"))


def wait_until_gone(pids: set[int], timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not [pid for pid in pids if alive(pid)]:
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"still alive {timeout:.0f} s after the kill: {[pid for pid in pids if alive(pid)]}")


def triaged_class(since: str, until: str) -> tuple[str, str]:
    """The root cause and class the triage names in the unit's journal between two times."""
    journal = on_host(f"journalctl -u vllm --no-pager --since '{since}' --until '{until}'")
    report = vllm_triage.triage_stream(io.BytesIO(journal.encode()), vllm_triage.load_rules(RULES))
    return report.root_cause, report.cause_class


@pytest.mark.parametrize(("fault", "process"), [
    ("api_server_sigkill", "the API server (MainPID)"),
    ("engine_oom_kill", "VLLM::EngineCore"),
])
def test_a_killed_vllm_process_takes_the_others_with_it_and_systemd_brings_it_back(
        deployed: PlayRun, fault: str, process: str):
    """SIGKILL of the main process (KillMode=mixed kills the engine and workers with it), or of the
    engine core, as the kernel's OOM killer kills (the API server then exits and the unit restarts):
    nothing of the old generation outlives it, the same release serves again with no playbook."""
    main_pid, release, restarts_before = int(service_state()[1]), on_host("readlink /opt/vllm-fleet/releases/current"), restarts()
    old = unit_pids()
    target = main_pid if fault == "api_server_sigkill" else int(on_host("pgrep -u vllm -f '^VLLM::EngineCore'"))
    assert target in old and len(old) >= 3, on_host("ps -o pid,args -u vllm")
    since = on_host("date '+%Y-%m-%d %H:%M:%S'")
    on_host(f"kill -KILL {target}")
    gone = wait_until_gone(old, 30)
    # journalctl's --until is a whole second and systemd's "Main process exited" falls inside the
    # second the processes went away: one second on, still before the restart (RestartSec=2) begins
    until = on_host("date -d '1 second' '+%Y-%m-%d %H:%M:%S'")
    served = wait_until_served(SERVE_TIMEOUT)
    cause, cause_class = triaged_class(since, until)
    print(f"\n[{fault}] old processes gone {gone:.1f} s after the kill; serving again after {gone + served:.0f} s; "
          f"triage: [{cause_class}] {cause}")
    assert restarts() == restarts_before + 1 and service_state()[0] == "active"
    assert on_host("readlink /opt/vllm-fleet/releases/current") == release
    assert not old & unit_pids()
    assert cause_class == "worker_killed", cause
    faults.record(fault, survived="recovered", seconds=gone + served, triage_class=cause_class,
                  message=f"SIGKILL of {process}: every old vLLM process gone in {gone:.1f} s, systemd restarted "
                          f"the unit (NRestarts +1) onto the same release; the journal: {cause}")


def test_a_full_dev_shm_is_refused_before_the_unit_is_stopped(deployed: PlayRun, tmp_path: Path):
    """Another account's file fills /dev/shm (held open, so it is nobody's stale segment): the restart
    stops before anything, naming the file; the running service keeps serving."""
    room = int(on_host("df --output=avail --block-size=1M /dev/shm | tail -n 1"))
    fill = room - 100  # leaves less than vllm_service_min_free_shm_mib (512)
    on_host(f"fallocate -l {fill}M /dev/shm/other-team-buffer && chown nobody /dev/shm/other-team-buffer")
    try:
        holder = inject("fault-shm", "python3 -c 'import time; f = open(\"/dev/shm/other-team-buffer\"); time.sleep(600)'",
                        user="nobody")
        running = service_state()
        refused = run_playbook(tmp_path, "playbooks/restart.yml")
        assert refused.rc != 0
        message = " ".join(refused.failed_result("Check there is room in /dev/shm for vLLM")["msg"].split())
        print(f"\n[shm full] {message}")
        assert "/dev/shm/other-team-buffer (nobody, " in message and "Nothing was stopped" in message, message
        assert service_state() == running and alive(holder)
        assert served_completion() > 0
    finally:
        on_host("systemctl stop fault-shm; rm -f /dev/shm/other-team-buffer", check=False)
    faults.record("shm_full", survived="refused before any change", seconds=refused.seconds, message=message)


def test_a_corrupted_compile_cache_is_rebuilt_at_the_restart(deployed: PlayRun, tmp_path: Path):
    """Every file of the torch.compile cache overwritten with random bytes. vLLM rebuilds what it
    fails to load ("Compiling model again due to a load failure"), but a broken inductor module it
    imports crashes every start of the same code ("InductorError ... Failed to import"); the restart
    then removes the cache once the triage names it, and starts again.
    The same restart finds a drop-in added to the unit since systemd loaded it: it reloads systemd
    and the new process has the drop-in's environment."""
    cache = "/var/lib/vllm/cache/torch_compile_cache"
    corrupted = int(on_host(f"n=0; for f in $(find {cache} -type f); do head -c 4096 /dev/urandom > $f; n=$((n+1)); done; "
                            "echo $n"))
    assert corrupted > 0
    dropin = "/etc/systemd/system/vllm.service.d/zz-test-reload.conf"
    on_host(f"mkdir -p {dropin.rsplit('/', 1)[0]} && printf '[Service]\\nEnvironment=VLLM_FLEET_TEST_RELOAD=1\\n' > {dropin}")
    try:
        run = run_playbook(tmp_path, "playbooks/restart.yml")
        assert run.rc == 0, run.output[-5000:]
        assert run.task_result(RELOAD_TASK)["changed"] is False
        pid = service_state()[1]
        assert "VLLM_FLEET_TEST_RELOAD=1" in on_host(f"tr '\\0' '\\n' < /proc/{pid}/environ")
    finally:
        on_host(f"rm -f {dropin} && systemctl daemon-reload")
    assert run.task_result(GATE_TASK)["completion_tokens"] > 0
    journal = on_host("journalctl -u vllm --no-pager -n 2000")
    if "Remove the broken torch.compile cache" in run.output:
        first = run.failed_result(GATE_TASK)
        assert first["triage"]["class"] == "compile_cache", first
        how = f"the start crashed ([compile_cache] {first['triage']['root_cause'][:120]}); the restart removed the cache and started again"
    else:
        assert "Compiling model again due to a load failure" in journal, journal[-3000:]
        how = "vLLM logged 'Compiling model again due to a load failure' and rebuilt it"
    print(f"\n[compile cache] {corrupted} files corrupted: {how}")
    faults.record("compile_cache_corrupt", survived="recovered", seconds=run.seconds,
                  message=f"{corrupted} cache files overwritten with random bytes: {how}; the gate passed",
                  triage_class="compile_cache" if "crashed" in how else "")


def test_a_shard_damaged_on_disk_is_found_by_verify_before_a_restart(deployed: PlayRun, tmp_path: Path):
    """One flipped byte in the served GGUF, its size and mtime kept (as a bad block leaves it):
    verify fails naming the file, and the running service is not touched."""
    model = on_host("readlink -f /var/lib/vllm-fleet/models/demo-qwen3/current")
    gguf = f"{model}/demo-qwen3-F32.gguf"
    flip = ("python3 -c \"import os, sys; p = sys.argv[1]; st = os.stat(p); f = open(p, 'r+b'); "
            "f.seek(st.st_size // 2); b = f.read(1)[0]; f.seek(st.st_size // 2); f.write(bytes([b ^ 1])); f.close(); "
            f"os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))\" {gguf}")
    running = service_state()
    on_host(flip)
    try:
        found = run_playbook(tmp_path, "playbooks/verify.yml")
        assert found.rc != 0
        message = found.failed_result("Check the served model files against what was verified when they were placed")["msg"]
        print(f"\n[shard corrupted] {message}")
        assert "demo-qwen3-F32.gguf: sha256 " in message and "A restart would load it" in message, message
        assert service_state() == running
    finally:
        on_host(flip)  # the same flip again puts the byte back
    faults.record("shard_corrupted", survived="failed clearly", seconds=found.seconds, message=message)
