"""vllm_fleet/tunnel.py with the real ssh client: the forward's command and its failures. The working
forward is tested end to end against the test host (tests/e2e/test_monitoring.py, dashboard --via)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.conftest import REPO_ROOT
from vllm_fleet import dashboard
from vllm_fleet.tunnel import TunnelError, forwarded_port, ssh_command

NO_HOST_KEYS = ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once the probe is closed


def test_the_forward_listens_on_the_loopback_and_passes_ssh_options():
    command = ssh_command("monitor-1", 40123, ("127.0.0.1", 9090), ["IdentityFile=/k"])
    assert command[:2] == ["ssh", "-N"] and command[-1] == "monitor-1"
    assert command[command.index("-L") + 1] == "127.0.0.1:40123:127.0.0.1:9090"
    assert "ExitOnForwardFailure=yes" in command and "IdentityFile=/k" in command
    assert "BatchMode=yes" in command  # never waits for a password


def test_an_unreachable_ssh_destination_fails_at_once_with_sshs_reason():
    started = time.monotonic()
    with pytest.raises(TunnelError, match=r"ssh to ssh://root@127\.0\.0\.1:\d+ failed: .*(refused|closed)"):
        with forwarded_port(f"ssh://root@127.0.0.1:{closed_port()}", ("127.0.0.1", 9090), lambda port: False,
                            NO_HOST_KEYS):
            pass
    assert time.monotonic() - started < 15


def test_the_dashboard_via_an_unreachable_host_exits_2_naming_ssh(tmp_path, capsys):
    destination = f"ssh://root@127.0.0.1:{closed_port()}"
    code = dashboard.main(["--via", destination, *(f"--ssh-option={option}" for option in NO_HOST_KEYS),
                           "--out", str(tmp_path / "d.png")],
                          REPO_ROOT / "files" / "monitoring" / "grafana-dashboard.json")
    assert code == 2
    assert f"ssh to {destination} failed" in capsys.readouterr().out
    assert not (tmp_path / "d.png").exists()
