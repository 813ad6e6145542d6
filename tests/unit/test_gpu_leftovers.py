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

from module_utils.gpu_leftovers import (
    CleanupResult,
    Scope,
    find_holders,
    out_of_scope_message,
    parse_compute_apps,
    parse_gpu_memory_used,
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
    assert held[0].in_scope is False  # neither the service user's nor a vLLM title


def test_finds_the_listener_of_the_port(children):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    children.append(spawn(
        f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"))
    holders = find_holders(Scope(OTHER_USER), "/nonexistent/nvidia*", port=port)
    assert [h.reasons for h in holders if h.pid == children[0].pid] == [[f"listens on port {port}"]]


def test_vllm_title_and_service_user_are_in_scope(children):
    # vLLM renames its processes (setproctitle); here the title is set through prctl's comm.
    children.append(spawn(
        "import ctypes, time; ctypes.CDLL(None).prctl(15, b'VLLM::EngineCor', 0, 0, 0); time.sleep(60)"))
    titled = [h for h in find_holders(Scope(OTHER_USER), "/nonexistent/*", None) if h.pid == children[0].pid]
    assert titled and titled[0].in_scope and "has a vLLM process title" in titled[0].reasons
    mine = [h for h in find_holders(Scope(ME), "/nonexistent/*", None) if h.pid == children[0].pid]
    assert f"runs as the service user {ME}" in mine[0].reasons


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
    from module_utils.gpu_leftovers import Holder
    message = out_of_scope_message([Holder(42, "root", "python3 -m http.server 8000", ["listens on port 8000"])])
    assert "refusing to stop 1 process(es) outside the cleanup scope" in message
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
