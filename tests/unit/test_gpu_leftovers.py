"""gpu_leftovers against real processes on this machine: children started by the test hold a
fixture "device" file, a listening port, a vLLM process title, or shared memory."""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gpu_leftovers import (
    CleanupResult,
    Scope,
    find_holders,
    out_of_scope_message,
    parse_compute_apps,
    read_cgroup,
    parse_gpu_memory_used,
    parse_visible_devices,
    stale_shm_files,
    stop_processes,
    wait_for_gpu_memory,
)

ME = pwd.getpwuid(os.getuid()).pw_name
OTHER_USER = "nobody-in-particular"


def spawn(code: str, *argv0: str) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", code, *argv0])
    time.sleep(0.5)
    return process


@pytest.fixture
def children():
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_finds_the_holder_of_a_device_file(tmp_path: Path, children):
    device = tmp_path / "nvidia0"
    device.write_text("")
    children.append(spawn(f"import time; f = open({str(device)!r}); time.sleep(60)"))
    holders = find_holders(Scope(OTHER_USER), str(tmp_path / "nvidia*"), port=None)
    held = [h for h in holders if h.pid == children[0].pid]
    assert held and held[0].reasons == [f"holds {device}"]
    assert held[0].in_scope is False  # neither the unit's nor the service user's


def test_finds_the_listener_of_the_port(children):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    children.append(spawn(
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"))
    holders = find_holders(Scope(OTHER_USER), "/nonexistent/nvidia*", port=port)
    assert [h.reasons for h in holders if h.pid == children[0].pid] == [[f"listens on port {port}"]]


TITLED = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'VLLM::EngineCor', 0, 0, 0); "


def test_a_vllm_title_alone_is_another_server_not_a_leftover(tmp_path: Path, children):
    # vLLM renames its processes (setproctitle); here the title is set through prctl's comm.
    device = tmp_path / "nvidia0"
    device.write_text("")
    children.append(spawn(TITLED + "time.sleep(60)"))
    children.append(spawn(TITLED + f"f = open({str(device)!r}); time.sleep(60)"))
    idle, holding = children[0].pid, children[1].pid
    found = {h.pid: h for h in find_holders(Scope(OTHER_USER), str(tmp_path / "nvidia*"), None)}
    assert idle not in found  # holds nothing of the unit's: left alone, not even reported
    assert found[holding].in_scope is False and found[holding].reasons == [f"holds {device}", "has a vLLM process title"]
    mine = {h.pid: h for h in find_holders(Scope(ME), "/nonexistent/*", None)}
    assert mine[idle].in_scope and f"runs as the service user {ME}" in mine[idle].reasons


def test_processes_of_the_unit_cgroup_are_in_scope_whoever_runs_them(children):
    children.append(spawn("import time; time.sleep(60)"))
    cgroup = read_cgroup(Path(f"/proc/{children[0].pid}"))
    found = {h.pid: h for h in find_holders(Scope(OTHER_USER, unit_cgroup=cgroup), "/nonexistent/*", None)}
    assert found[children[0].pid].in_scope and f"runs in the unit's cgroup {cgroup}" in found[children[0].pid].reasons
    elsewhere = Scope(OTHER_USER, unit_cgroup=cgroup + "-other.service")
    assert children[0].pid not in {h.pid for h in find_holders(elsewhere, "/nonexistent/*", None)}


# /proc/PID/cgroup of a unit's process on a cgroup v2 host, on a hybrid host such as the
# development VM (the v2 line is only "/"), and on a v1-only host.
UNIFIED = "0::/system.slice/vllm.service\n"
HYBRID = ("12:memory:/system.slice/vllm.service\n1:name=systemd:/system.slice/vllm.service\n"
          "0::/\n")
V1_ONLY = "4:pids:/system.slice/vllm.service\n1:name=systemd:/system.slice/vllm.service\n"
# A podman test host on the hybrid development VM (recorded): no cgroup namespace, so every path
# starts with the container's cgroup, the v2 line is the container's and not the unit's, and
# `systemctl show -p ControlGroup vllm` there gives the same full path as the name=systemd line.
CONTAINER = "/libpod_parent/libpod-a8e0bdbff32c5d5c3eaae1ec8ee0716a339d927dbfc2f64d57b421f6cce8edbc"
IN_CONTAINER = (f"9:name=systemd:{CONTAINER}/system.slice/vllm.service\n8:pids:{CONTAINER}\n"
                f"4:memory:{CONTAINER}\n0::{CONTAINER}\n")


@pytest.mark.parametrize(("cgroup_file", "control_group"), [
    (UNIFIED, "/system.slice/vllm.service"), (HYBRID, "/system.slice/vllm.service"),
    (V1_ONLY, "/system.slice/vllm.service"), (IN_CONTAINER, f"{CONTAINER}/system.slice/vllm.service"),
])
def test_the_units_processes_are_in_its_scope_on_every_cgroup_layout(tmp_path: Path, cgroup_file: str,
                                                                     control_group: str):
    (tmp_path / "cgroup").write_text(cgroup_file)
    assert read_cgroup(tmp_path) == control_group
    assert Scope(OTHER_USER, unit_cgroup=control_group).owns("root", read_cgroup(tmp_path))
    other = control_group.replace("vllm.service", "other.service")
    assert not Scope(OTHER_USER, unit_cgroup=other).owns("root", read_cgroup(tmp_path))


def test_a_process_outside_any_unit_on_a_hybrid_host_is_not_in_the_units_scope(tmp_path: Path):
    (tmp_path / "cgroup").write_text("1:name=systemd:/user.slice/user-1000.slice/session-4.scope\n0::/\n")
    assert not Scope(OTHER_USER, unit_cgroup="/system.slice/vllm.service").owns("root", read_cgroup(tmp_path))
    assert read_cgroup(tmp_path / "gone") == ""


def test_system_gpu_daemons_are_never_holders(tmp_path: Path, children):
    device = tmp_path / "nvidia0"
    device.write_text("")
    children.append(spawn(f"import time; f = open({str(device)!r}); time.sleep(60)", ))
    daemon = subprocess.Popen(["bash", "-c", f"exec -a /usr/bin/nvidia-persistenced {sys.executable} -c "
                               f"\"import time; f = open('{device}'); time.sleep(60)\""])
    children.append(daemon)
    time.sleep(0.5)
    found = {h.pid for h in find_holders(Scope(OTHER_USER), str(tmp_path / "nvidia*"), None)}
    assert children[0].pid in found and daemon.pid not in found


def test_only_the_unit_gpus_device_nodes_count(tmp_path: Path, children):
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (tmp_path / name).write_text("")
    children.append(spawn(f"import time; f = open({str(tmp_path / 'nvidia1')!r}); g = open({str(tmp_path / 'nvidiactl')!r}); "
                          "time.sleep(60)"))
    glob = str(tmp_path / "nvidia*")
    assert children[0].pid not in {h.pid for h in find_holders(Scope(OTHER_USER, gpus=(0,)), glob, None)}
    found = {h.pid: h for h in find_holders(Scope(OTHER_USER, gpus=(1,)), glob, None)}
    assert found[children[0].pid].reasons == [f"holds {tmp_path / 'nvidia1'}"]  # nvidiactl says nothing
    assert children[0].pid in {h.pid for h in find_holders(Scope(OTHER_USER), glob, None)}


def test_visible_devices_parsing():
    assert parse_visible_devices("0,1, 3") == (0, 1, 3)
    assert parse_visible_devices("") is None
    assert parse_visible_devices("GPU-5f3c1a2b-0000-0000-0000-000000000000") is None


def test_never_lists_itself_or_its_ancestors():
    holders = find_holders(Scope(ME), "/nonexistent/*", None)
    pids = {h.pid for h in holders}
    assert os.getpid() not in pids and os.getppid() not in pids and 1 not in pids


def test_stop_terminates_then_kills_the_stubborn(children):
    children.append(spawn("import time; time.sleep(60)"))
    children.append(spawn("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"))
    result = CleanupResult()
    polite, stubborn = children[0].pid, children[1].pid
    # Popen keeps its dead children as zombies until waited for; reap them to see them gone.

    def gone_or_reaped(pid: int) -> bool:
        for process in children:
            if process.pid == pid and process.poll() is not None:
                return False
        return True
    stop_processes([polite, stubborn], term_timeout=1.0, kill_timeout=2.0, result=result, is_alive=gone_or_reaped)
    assert result.terminated == [polite]
    assert result.killed == [stubborn]
    assert result.survivors == []
    assert children[1].returncode == -signal.SIGKILL


def test_stale_shm_spares_files_in_use(tmp_path: Path, children):
    stale, used, other = tmp_path / "nccl-stale", tmp_path / "psm_used", tmp_path / "keep-me"
    for path in (stale, used, other):
        path.write_bytes(b"\0" * 4096)
    children.append(spawn(
        f"import mmap, os, time; fd = os.open({str(used)!r}, os.O_RDWR); m = mmap.mmap(fd, 4096); os.close(fd); "
        "time.sleep(60)"))
    assert stale_shm_files(tmp_path, ["nccl-*", "psm_*"]) == [str(stale)]


def test_out_of_scope_message_names_each_process():
    from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gpu_leftovers import Holder
    message = out_of_scope_message([Holder(42, "root", "python3 -m http.server 8000", ["listens on port 8000"])])
    assert "refusing to stop 1 process(es) outside the cleanup scope" in message and "Nothing was stopped" in message
    assert "pid 42 (root: python3 -m http.server 8000) listens on port 8000" in message


def test_nvidia_smi_parsing_sums_per_pid_and_reads_gpus():
    apps = "12345, 70123\n12345, 1000\n23456, [N/A]\n"
    assert parse_compute_apps(apps) == {12345: 71123, 23456: 0}
    assert parse_gpu_memory_used("0, 97000\n1, 3\n") == {0: 97000, 1: 3}


def test_wait_for_gpu_memory_returns_when_free_or_at_timeout():
    readings = iter([{0: 90000}, {0: 5000}, {0: 2}])
    ticks = iter(range(100))
    waited, used = wait_for_gpu_memory(lambda: next(readings), 1024, timeout=30, sleep=lambda s: None,
                                       clock=lambda: next(ticks))
    assert used == {0: 2} and waited > 0
    waited, used = wait_for_gpu_memory(lambda: {0: 90000}, 1024, timeout=3, sleep=lambda s: None,
                                       clock=iter(range(100)).__next__)
    assert used == {0: 90000} and waited >= 3
    # Only the unit's GPUs are waited on: another job's busy GPU 1 does not hold the start.
    waited, used = wait_for_gpu_memory(lambda: {0: 2, 1: 90000}, 1024, timeout=30, sleep=lambda s: None,
                                       clock=iter(range(100)).__next__, gpus=(0,))
    assert used == {0: 2} and waited < 30
