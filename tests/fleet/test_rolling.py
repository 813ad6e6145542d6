"""Rolling restarts, releases and rollback on three CPU vLLM hosts behind a real HAProxy, with a
load generator sending completions through the balancer the whole time."""

from __future__ import annotations

import time
from pathlib import Path

import json
import subprocess
import threading
import pytest
import yaml

from tests.fleet.conftest import PORT_BASE, PREFIX, cli, play
from tests.harness.fleet_testbed import (
    LocalFleet, active, current_release, haproxy_servers, haproxy_states, haproxy_stats, internal_url, main_pid, on,
)
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.readiness import probe_once
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint
from tests.harness import faults
from tests.harness.loadgen import LoadGenerator

pytestmark = pytest.mark.slow
TESTBED = LocalFleet(prefix=PREFIX, size=3, port_base=PORT_BASE)
HOSTS, LB_URL = TESTBED.hosts, TESTBED.lb_url
FIRST, MIDDLE, LAST = HOSTS
# Three CPU vLLMs share two cores and each pins its engine to the same one, and an engine spins for
# a second after each step: light steady traffic, so that a restarting host is not starved by a
# spinning one (real hosts have their own CPUs).
LOAD = {"concurrency": 1, "max_tokens": 16, "pause": 2.0}
# Beside it, until 3 s after the first host's unit began to stop, a burst: short requests back to
# back, so that the stop is covered densely, without starving the hosts that start afterwards.
# (After SIGTERM, vLLM 0.32 answers /health 200 but fails new completions with HTTP 500 "cannot
# schedule new futures after shutdown" for seconds, until its listener closes: only a drain keeps
# the balancer from sending them there.)
BURST = {"concurrency": 2, "max_tokens": 4, "pause": 0.0}
BURST_AFTER_STOP_SECONDS = 3
# For a site.yml run whose change is the service's alone: python_env, vllm and model would only
# confirm the fleet deploy's state (the fixture asserts they changed nothing there).
SKIP_CONVERGED = "--skip-tags python_env,vllm,model"


# HAProxy's administrative flags: maintenance set through the runtime API, drain.
ADMIN_MAINT, ADMIN_DRAIN = 0x01, 0x08


class BalancerWatch:
    """Samples every member's HAProxy state once a second while a roll runs."""

    def __init__(self, lb: str):
        self.lb = lb
        self.samples: list[dict[str, tuple[int, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "BalancerWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.samples.append(haproxy_states(self.lb))
            except Exception:  # noqa: BLE001 a sample lost to a busy podman exec is only a gap
                continue

    def taken_out(self) -> set[str]:
        return {name for sample in self.samples for name, (_op, admin) in sample.items()
                if admin & (ADMIN_MAINT | ADMIN_DRAIN)}

    def most_out_at_once(self) -> int:
        return max((sum(1 for state in sample.values() if is_out(*state)) for sample in self.samples), default=0)

    def seen_down(self) -> set[str]:
        return {name for sample in self.samples for name, (op, _admin) in sample.items() if op != 2}


def is_out(op: int, admin: int) -> bool:
    return op != 2 or bool(admin & (ADMIN_MAINT | ADMIN_DRAIN))


class Traffic:
    """LOAD through the balancer for the whole roll, BURST until shortly after `first`'s unit began
    to stop, and the balancer's member states sampled meanwhile."""

    def __init__(self, lb: str, first: str, burst: bool = True):
        self.lb, self.first = lb, first
        self.load = LoadGenerator(LB_URL, "demo", **LOAD)
        # Without a burst (a play whose first stop comes minutes in), the burst generator never starts.
        self.bursting = burst
        self.burst = LoadGenerator(LB_URL, "demo", **BURST)
        self.watch = BalancerWatch(lb)
        self._until_stopped = threading.Thread(target=self._burst_until_stopped, daemon=True)
        self._stop_watch: subprocess.Popen | None = None
        self.retried = self.first_5xx = 0

    def _counters(self) -> tuple[int, int]:
        """HAProxy's retries and redispatches over all members, and 5xx answered by `first` (one read)."""
        stats = haproxy_stats(self.lb)
        return (sum(int(row.get("wretr") or 0) + int(row.get("wredis") or 0) for row in stats.values()),
                int(stats[self.first].get("hrsp_5xx") or 0))

    def _burst_until_stopped(self) -> None:
        self._stop_watch = subprocess.Popen(["podman", "exec", self.first, "sh", "-c",
                                             "while systemctl -q is-active vllm; do sleep 0.2; done"])
        self._stop_watch.wait()
        time.sleep(BURST_AFTER_STOP_SECONDS)
        self.burst.stop()

    def __enter__(self) -> "Traffic":
        self._counters_before = self._counters()
        self.watch.__enter__()
        self.load.start()
        if self.bursting:
            self.burst.start()
            self._until_stopped.start()
        time.sleep(5)
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(5)
        self.burst.stop()
        self.load.stop()
        self.watch.__exit__()
        if self._stop_watch and self._stop_watch.poll() is None:  # the roll ended before this host stopped
            self._stop_watch.kill()
        if self.bursting:
            self._until_stopped.join(timeout=30)
        (retried, first_5xx), (retried_before, first_5xx_before) = self._counters(), self._counters_before
        self.retried, self.first_5xx = retried - retried_before, first_5xx - first_5xx_before

    @property
    def failed(self) -> int:
        return self.load.counts.failed + self.burst.counts.failed

    def summary(self) -> str:
        load, burst = self.load.counts, self.burst.counts
        return (f"{load.sent} steady requests ({load.failed} failed {load.as_dict()['errors']}), "
                f"{burst.sent} burst requests ({burst.failed} failed {burst.as_dict()['errors']}), "
                f"{self.retried} retried or redispatched by HAProxy, {self.first_5xx} answered 5xx by {self.first}; "
                f"{len(self.watch.samples)} balancer samples")


def completes(base_url: str) -> bool:
    """The host serves on its own (not through the balancer): the readiness gate's probe passes."""
    return probe_once(Endpoint(base_url, timeout=60), "demo")[0]


def test_rolling_restart_under_load_drops_no_request(fleet: LocalFleet, tmp_path: Path):
    """Two of the three hosts (two make "one at a time" observable; the third restart would prove
    nothing new and cost a vLLM start): LAST, outside --limit, keeps its process."""
    rolled = [FIRST, MIDDLE]
    before = {host: main_pid(host) for host in HOSTS}
    with Traffic(fleet.lb, FIRST) as traffic:
        roll = play(fleet, "playbooks/rolling_restart.yml", tmp_path / "roll", f"--limit {','.join([*rolled, fleet.lb])}")
    print(f"\nrolling restart of {len(rolled)} hosts in {roll.seconds:.0f} s under load: {traffic.summary()}")
    assert roll.rc == 0, roll.output[-6000:]
    assert traffic.failed == 0, traffic.summary()
    assert traffic.load.counts.served >= 10 and traffic.burst.counts.served >= 10, traffic.summary()
    # The drain, not HAProxy's retries, kept the clients whole: each member was taken out, one at a time.
    assert traffic.watch.taken_out() == set(rolled), traffic.watch.samples[-5:]
    assert traffic.watch.most_out_at_once() == 1, traffic.watch.samples
    assert traffic.retried == 0, haproxy_stats(fleet.lb)
    for host in rolled:
        assert active(host) == "active" and main_pid(host) != before[host], host
    assert main_pid(LAST) == before[LAST]
    assert set(haproxy_servers(fleet.lb).values()) == {"2"}, haproxy_servers(fleet.lb)  # every member UP again


def test_the_same_restart_without_the_drain_loses_or_reroutes_requests(fleet: LocalFleet, tmp_path: Path):
    """The negative control of the test above: the same play and traffic on FIRST with the drain
    switched off (no traffic role), so the balancer learns of the stop only from its health checks.
    The clients or HAProxy's retries must see it: the zero above is the drain's, not luck's."""
    pid = main_pid(FIRST)
    with Traffic(fleet.lb, FIRST) as traffic:
        roll = play(fleet, "playbooks/rolling_restart.yml", tmp_path / "undrained", f"--limit {FIRST}",
                    vllm_service_traffic_role="")
    print(f"\nrestart of {FIRST} without the drain in {roll.seconds:.0f} s: {traffic.summary()}")
    assert roll.rc == 0, roll.output[-6000:]
    assert main_pid(FIRST) != pid and active(FIRST) == "active"
    # Never drained, only seen down by the health checks.
    assert traffic.watch.taken_out() == set() and FIRST in traffic.watch.seen_down(), traffic.watch.samples[-5:]
    assert traffic.failed + traffic.retried > 0, traffic.summary()
    assert set(haproxy_servers(fleet.lb).values()) == {"2"}, haproxy_servers(fleet.lb)


def test_a_config_change_deployed_by_site_yml_rolls_one_host_at_a_time_drained(fleet: LocalFleet, tmp_path: Path):
    """site.yml with a new setting on FIRST and LAST: deploy.yml drains each, restarts it onto its new
    release and puts it back, one host at a time, under load; MIDDLE, unchanged, keeps its process."""
    for host in (FIRST, LAST):
        fleet.host_vars(host).write_text(yaml.safe_dump({"vllm_service_extra_env": {"FLEET_TEST_DEPLOY": "1"}}))
    releases = {host: current_release(host) for host in HOSTS}
    pids = {host: main_pid(host) for host in HOSTS}
    try:
        # No burst: site.yml's prechecks and roles run for minutes before the first stop, and a
        # burst that long would starve the two cores (load average above 20 in a clean-clone run).
        with Traffic(fleet.lb, FIRST, burst=False) as traffic:
            deployed = play(fleet, "site.yml", tmp_path / "deploy", SKIP_CONVERGED)
    finally:
        for host in (FIRST, LAST):
            fleet.host_vars(host).unlink()
    print(f"\nsite.yml rolled {FIRST} and {LAST} in {deployed.seconds:.0f} s under load: {traffic.summary()}")
    assert deployed.rc == 0, deployed.output[-6000:]
    assert traffic.failed == 0 and traffic.load.counts.served >= 5, traffic.summary()
    assert traffic.watch.taken_out() == {FIRST, LAST}, traffic.watch.samples[-5:]
    assert traffic.watch.most_out_at_once() == 1, traffic.watch.samples
    assert traffic.retried == 0, haproxy_stats(fleet.lb)
    for host in (FIRST, LAST):
        assert current_release(host) != releases[host] and main_pid(host) != pids[host], host
        assert "FLEET_TEST_DEPLOY=1" in on(host, f"tr '\\0' '\\n' < /proc/{main_pid(host)}/environ"), host
    assert current_release(MIDDLE) == releases[MIDDLE] and main_pid(MIDDLE) == pids[MIDDLE]
    assert set(haproxy_servers(fleet.lb).values()) == {"2"}, haproxy_servers(fleet.lb)


def test_failing_release_mid_roll_is_rolled_back_and_stops_the_roll(fleet: LocalFleet, tmp_path: Path):
    """FIRST gets a harmless new release, MIDDLE a broken tuning value, LAST is never reached."""
    fleet.host_vars(FIRST).write_text(yaml.safe_dump({"vllm_service_extra_env": {"FLEET_TEST_MARK": "1"}}))
    fleet.host_vars(MIDDLE).write_text(yaml.safe_dump({"vllm_service_attention_backend": "NO_SUCH_BACKEND"}))
    releases = {host: current_release(host) for host in HOSTS}
    pids = {host: main_pid(host) for host in HOSTS}
    try:
        with LoadGenerator(LB_URL, "demo", **LOAD) as load:
            code, report, output = cli(fleet, "restart", "--apply", json_file=tmp_path / "roll.json")
    finally:
        for host in (FIRST, MIDDLE):
            fleet.host_vars(host).unlink()
    counts = load.counts
    print(f"\nroll with a broken release on {MIDDLE}: {counts.sent} requests, {counts.failed} failed\n{output[-3000:]}")
    assert code == 5, output[-6000:]
    states = {entry["host"]: entry for entry in report["hosts"]}
    assert {host: states[host]["state"] for host in HOSTS} == {
        FIRST: "serving", MIDDLE: "rolled back", LAST: "not reached"}, report
    # The cause is named: the readiness gate's triage of the crash, through the rollback message.
    message = states[MIDDLE]["message"]
    assert "rolled back" in message and "NO_SUCH_BACKEND" in message, message
    assert counts.failed == 0, counts.as_dict()

    # FIRST: the new release serves; MIDDLE: its old release again, the failed one kept and marked.
    assert current_release(FIRST) != releases[FIRST] and main_pid(FIRST) != pids[FIRST]
    assert "FLEET_TEST_MARK=1" in on(FIRST, f"tr '\\0' '\\n' < /proc/{main_pid(FIRST)}/environ")
    # Extra env values may be secrets: the release's manifest keeps their names only.
    manifest = json.loads(on(FIRST, "cat /opt/vllm-fleet/releases/current/release.json"))
    assert manifest["tuning"]["extra_env"] == ["FLEET_TEST_MARK"], manifest["tuning"]
    assert current_release(MIDDLE) == releases[MIDDLE] and active(MIDDLE) == "active"
    failed = on(MIDDLE, "readlink /opt/vllm-fleet/releases/previous")
    assert "NO_SUCH_BACKEND" in on(MIDDLE, f"cat /opt/vllm-fleet/releases/{failed}/FAILED")
    assert "NO_SUCH_BACKEND" in on(MIDDLE, f"cat /opt/vllm-fleet/releases/{failed}/release.env")
    # LAST was never touched.
    assert main_pid(LAST) == pids[LAST] and current_release(LAST) == releases[LAST]
    for host in HOSTS:
        assert completes(internal_url(host)), host
    assert set(haproxy_servers(fleet.lb).values()) == {"2"}, haproxy_servers(fleet.lb)
    faults.record("failing_release_mid_roll", survived="failed clearly", seconds=None,
                  message=f"{MIDDLE} rolled back, {LAST} not reached, {counts.failed} of {counts.sent} requests "
                          f"failed: {message}")


def test_rollback_on_demand_and_status(fleet: LocalFleet, tmp_path: Path):
    """After the roll above: FIRST goes back to its earlier release; MIDDLE's previous release is the
    one that failed, so a rollback there is refused and changes nothing."""
    first_previous = on(FIRST, "readlink /opt/vllm-fleet/releases/previous")
    code, report, output = cli(fleet, "rollback", "--limit", FIRST, json_file=tmp_path / "rollback.json")
    assert code == 0, output[-6000:]
    assert current_release(FIRST) == first_previous
    assert "FLEET_TEST_MARK" not in on(FIRST, f"tr '\\0' '\\n' < /proc/{main_pid(FIRST)}/environ")

    middle_pid = main_pid(MIDDLE)
    code, report, output = cli(fleet, "rollback", "--limit", MIDDLE, json_file=tmp_path / "refused.json")
    assert code == 3, output[-6000:]
    entry = next(h for h in report["hosts"] if h["host"] == MIDDLE)
    assert entry["state"] == "failed" and "failed before" in entry["message"], entry
    assert main_pid(MIDDLE) == middle_pid and active(MIDDLE) == "active"

    code, report, output = cli(fleet, "status", json_file=tmp_path / "status.json")
    assert code == 0, output[-6000:]
    for entry in report["hosts"]:
        assert entry["state"] == "serving" and entry["release"] == current_release(entry["host"]), entry
    assert "summary" in output and all(host in output for host in HOSTS)
