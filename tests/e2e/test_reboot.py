"""The service comes back on its own. A reboot that gives the host another address: bound to the
address the host has now, with no playbook run and no failed start. (Bound to the address of the
deploy, vLLM exits with `[Errno 99] Cannot assign requested address` until systemd gives up.)
A start failure that passes: retried with a growing back-off, never left `failed`.
The e2e tests after this module run on the renumbered host; test_site's second run then proves
that site.yml has nothing to change there."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import time
import urllib.request

import pytest

from tests.e2e.conftest import API_KEY, API_PORT, HOST, SSH_PORT, PlayRun, on_host, service_state, wait_for_series
from tests.harness import faults, fleet_testbed  # (testhost() imported by name would be collected as a test)

pytestmark = pytest.mark.slow

SERVE_TIMEOUT = 300


def internal_address() -> ipaddress.IPv4Interface:
    found = json.loads(on_host("ip -j -4 addr show dev eth0"))[0]["addr_info"][0]
    return ipaddress.IPv4Interface(f"{found['local']}/{found['prefixlen']}")


def another_address(current: ipaddress.IPv4Interface) -> str:
    """An address in the same network, 256 further on (the test hosts' podman network is a /16)."""
    candidate = current.ip + 256
    assert candidate in current.network, current
    return str(candidate)


def served_completion() -> int:
    body = json.dumps({"model": "demo", "prompt": "Hello", "max_tokens": 4}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{API_PORT}/v1/completions", body,
                                     {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["usage"]["completion_tokens"]


def wait_until_served(timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if served_completion() > 0:
                return time.monotonic() - started
        except OSError:
            pass
        time.sleep(2)
    raise AssertionError(f"not serving {timeout:.0f} s after it went down: {service_state()}\n"
                         + on_host("journalctl -u vllm --no-pager | tail -30", check=False))


def test_reboot_with_a_new_address_serves_again_without_a_playbook(deployed: PlayRun):
    before = internal_address()
    release = on_host("readlink /opt/vllm-fleet/releases/current")
    new_address = another_address(before)

    subprocess.run(["podman", "stop", "-t", "30", HOST], check=True, capture_output=True)  # systemd shuts down
    subprocess.run(["podman", "network", "disconnect", "podman", HOST], check=True, capture_output=True)
    subprocess.run(["podman", "network", "connect", "--ip", new_address, "podman", HOST], check=True,
                   capture_output=True)
    fleet_testbed.testhost("up", HOST, str(SSH_PORT), str(API_PORT))  # starts it again and waits for boot and SSH
    seconds = wait_until_served(SERVE_TIMEOUT)
    print(f"\n[reboot] {before.ip} -> {new_address}: serving again {seconds:.0f} s after boot")

    assert str(internal_address().ip) == new_address != str(before.ip)
    listening = on_host("ss -Hltn sport = :8000")
    assert f"{new_address}:8000" in listening, listening
    assert on_host("systemctl show vllm --property=NRestarts --value") == "0"  # no failed start first
    assert on_host("readlink /opt/vllm-fleet/releases/current") == release
    journal = on_host("journalctl -u vllm --no-pager")
    assert f"vllm-fleet-serve: --host {new_address} (the address of this host in {before.network})" in journal
    assert "Cannot assign requested address" not in journal
    faults.record("reboot_new_address", survived="recovered", seconds=seconds,
                  message=f"{before.ip} -> {new_address}: serving again after boot, no playbook, no failed start")


def test_a_transient_start_failure_backs_off_and_heals_without_an_operator(deployed: PlayRun):
    """The release's venv goes missing for a while (as under a mount that comes up late) and vLLM
    crashes: systemd keeps restarting, the launcher waits longer after each failed start, the unit
    never ends `failed` (a start limit of 3 would have ended it), and once the venv is back the
    service serves again with no playbook run."""
    release = on_host("readlink -f /opt/vllm-fleet/releases/current")
    restarts_before = int(on_host("systemctl show vllm --property=NRestarts --value"))
    on_host(f"mv {release}/venv {release}/venv.away")
    try:
        on_host("systemctl kill --signal=SIGKILL vllm")
        failed_starts = on_host(
            "for _ in $(seq 120); do n=$(systemctl show vllm --property=NRestarts --value); "
            f"[ $((n - {restarts_before})) -ge 4 ] && break; "
            "[ \"$(systemctl show vllm --property=ActiveState --value)\" = failed ] && break; sleep 0.5; done; "
            f"echo $((n - {restarts_before}))")
        state = on_host("systemctl show vllm --property=ActiveState,SubState,Result")
        # the Prometheus of site.yml sees the restarts through the node exporter and fires the alert
        alert, alert_seconds = wait_for_series('ALERTS{alertname="VllmCrashLooping", alertstate="firing"}', 60)
    finally:
        on_host(f"mv {release}/venv.away {release}/venv")
    journal = on_host("journalctl -u vllm --no-pager -n 200")
    print(f"\n[transient failure] {failed_starts} failed starts in a row, then: {state.split()}")
    assert int(failed_starts) >= 4 and "ActiveState=failed" not in state, journal[-3000:]
    assert [series["metric"]["host"] for series in alert] == ["vllm-fleet-local"]  # inventory/local's name
    print(f"[transient failure] VllmCrashLooping firing {alert_seconds:.0f} s after the 4th restart")
    waits = [float(wait) for wait in re.findall(r"waiting ([0-9.]+) s more before starting \(back-off\)", journal)]
    assert len(waits) >= 2 and waits == sorted(waits) and waits[-1] > waits[0], journal[-3000:]
    seconds = wait_until_served(SERVE_TIMEOUT)
    print(f"[transient failure] back-off waits {waits}; serving again {seconds:.0f} s after the venv came back")
    assert on_host("readlink -f /opt/vllm-fleet/releases/current") == release
    faults.record("transient_start_failure", survived="recovered", seconds=seconds,
                  message=f"{failed_starts} failed starts in a row, back-off waits {waits} s, never failed; "
                          "serving again once the venv was back")
