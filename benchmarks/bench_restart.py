#!/usr/bin/env python3
"""Safe-restart figures on the local test host (tools/deploy-local.sh must have run):

1. seconds from a crash-looping start (a bad vLLM argument) to the play's failure, measured from
   the unit's own first crash in its journal;
2. seconds of the cleanup step with N leftover vLLM-titled processes, against N = 0 as baseline.

    .venv/bin/python benchmarks/bench_restart.py [--leftovers 1 8 32]

It restores the service (site.yml) before it ends.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST = "vllm-fleet-local"
ENV = {**os.environ, "PATH": f"{REPO_ROOT / '.venv' / 'bin'}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1"}


def on_host(command: str) -> str:
    return subprocess.run(["podman", "exec", HOST, "sh", "-c", command], check=True, capture_output=True,
                          text=True).stdout.strip()


def ansible(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{result.stdout[-3000:]}{result.stderr[-2000:]}")
    return result


def first_crash_after(since: float) -> float | None:
    """Realtime of the first 'Main process exited' after the play's own start of the unit."""
    started = False
    for line in on_host(f"journalctl -u vllm -o json --no-pager --since @{int(since)}").splitlines():
        entry = json.loads(line)
        message = str(entry.get("MESSAGE", ""))
        started = started or message.startswith("Started vllm.service")
        if started and "Main process exited" in message:
            return int(entry["__REALTIME_TIMESTAMP"]) / 1e6
    return None


def crash_loop_figure() -> None:
    if on_host("systemctl is-active vllm || true") != "active":
        sys.exit("vllm is not active on the test host: run tools/deploy-local.sh first")
    started = time.time()
    result = ansible(["ansible-playbook", "site.yml", "-e", '{"vllm_service_extra_args": ["--no-such-flag"]}'],
                     check=False)
    failed_at = time.time()
    if result.returncode == 0:
        sys.exit("the broken start did not fail")
    crash = first_crash_after(started - 1)
    flat = " ".join(result.stdout.split())
    cause = flat[flat.find("Root cause"):][:160] if "Root cause" in flat else "?"
    print(f"crash loop: play failed {failed_at - crash:5.1f} s after the unit's first crash "
          f"({failed_at - started:5.1f} s for the whole play)")
    print(f"            {cause[:160]}")
    ansible(["ansible-playbook", "site.yml"])


def timed_cleanup(leftovers: int) -> float:
    for index in range(leftovers):
        on_host(f"systemd-run --quiet --uid=vllm --unit=bench-leftover-{index} --property=KillMode=process "
                f"bash -c 'exec -a VLLM::Worker_TP{index} sleep 600'")
    on_host("systemctl stop vllm")
    started = time.perf_counter()
    ansible(["ansible", HOST, "-b", "-m", "vllm_cleanup", "-a", json.dumps({"service_user": "vllm", "port": 8000})])
    seconds = time.perf_counter() - started
    stopped = on_host("pgrep -fc '^VLLM::Worker_TP' || true")
    if stopped not in ("0", ""):
        sys.exit(f"{stopped} leftovers survived the cleanup")
    on_host("systemctl reset-failed 'bench-leftover-*' 2>/dev/null || true")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leftovers", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    crash_loop_figure()
    baseline = timed_cleanup(0)
    print(f"cleanup, no leftovers (baseline): {baseline:5.2f} s (ansible ad-hoc round trip included)")
    for count in args.leftovers:
        seconds = timed_cleanup(count)
        print(f"cleanup, {count:3d} leftovers:            {seconds:5.2f} s  ({seconds / baseline:4.2f}x baseline)")
    ansible(["ansible-playbook", "site.yml"])


if __name__ == "__main__":
    main()
