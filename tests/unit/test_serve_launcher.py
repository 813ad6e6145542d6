"""vllm-fleet-serve: the unit's launcher that binds vLLM to the host's address at start."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils import serve_launcher
from tests.conftest import REPO_ROOT

# A podman test host's interfaces.
ADDRESSES = [ipaddress.IPv4Interface("127.0.0.1/8"), ipaddress.IPv4Interface("10.88.0.20/16")]
SERVE = ["/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m.gguf"]


def test_reads_this_machines_addresses():
    assert ipaddress.IPv4Interface("127.0.0.1/8") in serve_launcher.read_addresses()


def test_network_host_is_replaced_by_the_address_the_host_has_now():
    argv = [*SERVE, "--host", "network:10.88.0.0/16", "--port", "8000"]
    resolved = serve_launcher.resolve_host(argv, lambda: ADDRESSES, 0)
    assert resolved == [*SERVE, "--host", "10.88.0.20", "--port", "8000"]


def test_a_literal_host_is_passed_through():
    argv = [*SERVE, "--host", "10.1.2.3", "--port", "8000"]
    assert serve_launcher.resolve_host(argv, lambda: [], 0) == argv


def test_waits_for_an_address_that_comes_up_late():
    reads = [[ipaddress.IPv4Interface("127.0.0.1/8")]] * 3 + [ADDRESSES]
    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    chosen = serve_launcher.wait_for_address(ipaddress.IPv4Network("10.88.0.0/16"), lambda: reads.pop(0), 60,
                                             sleep=sleep, clock=lambda: now[0])
    assert chosen == "10.88.0.20" and slept == [1.0, 1.0, 1.0]


def test_no_address_in_the_network_names_the_network_and_what_the_host_has():
    with pytest.raises(serve_launcher.NoAddress) as raised:
        serve_launcher.resolve_host([*SERVE, "--host", "network:192.168.7.0/24"],
                                    lambda: ADDRESSES, 0, sleep=lambda _: None)
    message = str(raised.value)
    assert "no address of this host is in 192.168.7.0/24" in message
    assert "127.0.0.1/8, 10.88.0.20/16" in message


def run_script(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "plugins" / "module_utils" / "serve_launcher.py"), *args],
                          capture_output=True, text=True, env={**os.environ, **env}, check=False)


def test_the_script_execs_the_command_with_the_resolved_host():
    done = run_script("/bin/echo", "serve", "--host", "network:127.0.0.0/8")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "serve --host 127.0.0.1\n"
    assert "--host 127.0.0.1 (the address of this host in 127.0.0.0/8)" in done.stderr


def test_the_script_fails_with_the_reason_when_the_address_never_comes():
    # A documentation network (RFC 5737) this machine has no address in.
    have = serve_launcher.read_addresses()
    network = next(net for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
                   if not any(address.ip in ipaddress.IPv4Network(net) for address in have))
    done = run_script("/bin/echo", "--host", f"network:{network}", FLEET_BIND_WAIT_SECONDS="0")
    assert done.returncode == 1 and done.stdout == ""
    assert f"no address of this host is in {network} after waiting 0 s (it has: 127.0.0.1/8" in done.stderr


def test_the_gap_after_each_failed_start_doubles_up_to_the_cap():
    assert [serve_launcher.restart_gap(n, 10, 300) for n in range(0, 8)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_a_streak_grows_with_quick_restarts_and_ends_after_a_healthy_run(tmp_path):
    streaks = [serve_launcher.note_start(tmp_path, now, healthy_seconds=900) for now in (1000, 1030, 1075, 1200)]
    assert streaks == [0, 1, 2, 3]
    assert serve_launcher.note_start(tmp_path, 1200 + 901, healthy_seconds=900) == 0  # it ran 15 min: healthy
    (tmp_path / serve_launcher.STATE_FILE).write_text("not json")
    assert serve_launcher.note_start(tmp_path, 5000, healthy_seconds=900) == 0


def test_back_off_waits_the_gap_less_what_systemd_already_waited(tmp_path):
    env = {"FLEET_STATE_DIRECTORY": str(tmp_path), "FLEET_RESTART_SECONDS": "2", "FLEET_RESTART_MAX_SECONDS": "10"}
    clock, waited = [100.0], []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        clock[0] += seconds

    for _start in range(6):  # each start fails 1 s in; systemd waits RestartSec before the next
        serve_launcher.back_off(env, sleep=sleep, clock=lambda: clock[0])
        clock[0] += 1 + 2
    # gaps 2, 4, 8, 10 (capped), 10: systemd's 2 s plus the launcher's share
    assert waited == [2, 6, 8, 8]
    assert serve_launcher.back_off({}, sleep=sleep) == 0  # outside the unit: no state, no wait


def test_the_script_backs_off_then_execs(tmp_path):
    (tmp_path / serve_launcher.STATE_FILE).write_text(f'{{"started": {time.time()}, "streak": 2}}')  # a moment ago
    done = run_script("/bin/echo", "serve", FLEET_STATE_DIRECTORY=str(tmp_path), FLEET_RESTART_SECONDS="0.05",
                      FLEET_RESTART_MAX_SECONDS="1")
    assert done.returncode == 0 and done.stdout == "serve\n", done.stderr
    assert "start 4 of a streak of failed starts: waiting 0.15 s more before starting (back-off)" in done.stderr
