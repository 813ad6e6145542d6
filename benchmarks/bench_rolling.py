#!/usr/bin/env python3
"""How much does a rolling restart cost beyond the restarts themselves?

Makes a local fleet (N CPU vLLM test hosts behind HAProxy, tests/harness/fleet_testbed.py), deploys it,
then, in one process and under the same light load through the balancer:
  1. baseline: each host restarted by hand, one after another (systemctl restart, then polled
     until /v1/models lists the model and a completion answers): the hosts' own stop+start+ready;
  2. playbooks/rolling_restart.yml over the same hosts (drain, in-flight wait, the safe restart
     chain, gate, back into the balancer).
Prints both, the roll's own restart-chain tasks per host (stop, cleanup, start, ready), and the
overhead ratio roll total / sum of those (target <= 1.10), with the by-hand sum beside it.

  .venv/bin/python benchmarks/bench_rolling.py [--hosts 3] [--keep] [--prefix P --port-base N --reuse]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness.fleet_testbed import REPO_ROOT, LocalFleet, internal_url, on, run_playbook  # noqa: E402
from tests.harness.loadgen import LoadGenerator  # noqa: E402
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.readiness import CompletionFailed, probe_once  # noqa: E402
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint  # noqa: E402

CHAIN = ("Stop vllm", "Stop leftover GPU and vLLM processes, remove stale shared memory", "Start vllm",
         "Wait until vLLM serves, failing fast on a crash")
WORK = REPO_ROOT / ".cache" / "bench-rolling"


def ready(base_url: str) -> bool:
    """The readiness gate's own probe: /health, /v1/models lists demo, a completion with tokens."""
    try:
        return probe_once(Endpoint(base_url, timeout=30), "demo")[0]
    except CompletionFailed:
        return False


def restart_by_hand(host: str) -> float:
    url = internal_url(host)
    started = time.perf_counter()
    on(host, "systemctl restart vllm")
    while not ready(url):
        time.sleep(0.25)
    return time.perf_counter() - started


def chain_seconds(events: list[dict]) -> dict[str, float]:
    """Per host: the summed durations of the restart chain's tasks in a playbook run."""
    out: dict[str, float] = {}
    for event in events:
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task") in CHAIN:
            out[data["host"]] = out.get(data["host"], 0.0) + float(data.get("duration") or 0.0)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the fleet running")
    parser.add_argument("--prefix", default="vllm-fleet-bench", help="test host names (PREFIX-1 ..., PREFIX-lb)")
    parser.add_argument("--port-base", type=int, default=2260)
    parser.add_argument("--reuse", action="store_true", help="keep test hosts that exist (deploy is then a no-op)")
    args = parser.parse_args()
    os.environ["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"  # ansible-playbook
    fleet = LocalFleet(prefix=args.prefix, size=args.hosts, port_base=args.port_base)
    fleet.up(fresh=not args.reuse)
    WORK.mkdir(parents=True, exist_ok=True)
    fleet.write_inventory(Path(WORK / "inventory"))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    deployed = run_playbook(fleet.inventory, "site.yml", WORK / f"deploy-{stamp}", WORK / "results")
    if deployed.rc != 0:
        print(deployed.output[-5000:])
        return 1
    print(f"deployed {args.hosts} hosts in {deployed.seconds:.0f} s")
    try:
        with LoadGenerator(fleet.lb_url, "demo", concurrency=1, max_tokens=16, pause=2.0) as load:
            baseline = {host: restart_by_hand(host) for host in fleet.hosts}
            base_failed = load.counts.failed  # by-hand restarts have no drain: clients see them
            roll = run_playbook(fleet.inventory, "playbooks/rolling_restart.yml", WORK / f"roll-{stamp}", WORK / "results")
        if roll.rc != 0:
            print(roll.output[-5000:])
            return 1
        chain = chain_seconds(roll.events)
        counts = load.counts
        print(f"\n{'host':24} {'by hand: restart+ready s':>26} {'roll: chain tasks s':>20}")
        for host in fleet.hosts:
            print(f"{host:24} {baseline[host]:26.1f} {chain.get(host, 0.0):20.1f}")
        own = sum(baseline.values())
        print(f"\nsum of the hosts' own restarts (by hand): {own:.1f} s")
        print(f"sum of the roll's restart-chain tasks:     {sum(chain.values()):.1f} s")
        print(f"rolling restart, total:                   {roll.seconds:.1f} s")
        print(f"overhead ratio (roll total / the roll's own stop+start+ready): {roll.seconds / sum(chain.values()):.3f} "
              "(target <= 1.10)")
        print(f"roll total / by-hand restarts: {roll.seconds / own:.3f} (the by-hand restarts ran earlier, "
              "so a busy machine moves this one)")
        print(f"load through the balancer: {counts.sent} requests, {counts.failed - base_failed} failed during the "
              f"roll, {base_failed} during the by-hand restarts")
    finally:
        if not args.keep:
            fleet.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
