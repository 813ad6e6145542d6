#!/usr/bin/env python3
"""Wall time of a first converge of site.yml on a fresh test host, and of a no-op re-run.

    .venv/bin/python benchmarks/bench_converge.py [--keep]

Creates its own test host (vllm-fleet-bench, SSH 127.0.0.1:2224, API 127.0.0.1:8002), runs
site.yml twice and prints both times, the ratio, and changed counts. The controller wheelhouse
in .cache/wheelhouse is reused when present (the first figure then excludes its download).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
HOST, SSH_PORT, API_PORT = "vllm-fleet-bench", 2224, 8002
RECAP = re.compile(r"changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


def testhost(*args: str) -> None:
    subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), *args], check=True)


def timed_site_run() -> tuple[float, int]:
    env = {**os.environ, "PATH": f"{REPO_ROOT / '.venv' / 'bin'}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1",
           "VLLM_FLEET_LOCAL_SSH_PORT": str(SSH_PORT), "VLLM_FLEET_LOCAL_API_PORT": str(API_PORT)}
    cmd = ["ansible-playbook", "site.yml", "-i", "inventory/local"]
    started = time.perf_counter()
    result = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    recap = RECAP.search(result.stdout)
    if result.returncode != 0 or not recap:
        sys.exit(f"site.yml failed (rc {result.returncode}):\n{result.stdout[-4000:]}{result.stderr[-2000:]}")
    return seconds, int(recap.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the bench host running")
    args = parser.parse_args()
    wheelhouse_cached = any((REPO_ROOT / ".cache" / "wheelhouse").glob("*/.complete"))
    testhost("down", HOST)
    testhost("up", HOST, str(SSH_PORT), str(API_PORT))
    try:
        first, first_changed = timed_site_run()
        second, second_changed = timed_site_run()
    finally:
        if not args.keep:
            testhost("down", HOST)
    print(f"first converge (fresh host{', wheelhouse cached' if wheelhouse_cached else ''}): "
          f"{first:7.1f} s  changed={first_changed}")
    print(f"no-op re-run:                   {second:7.1f} s  changed={second_changed}")
    print(f"re-run / first:                 {second / first:7.3f}")


if __name__ == "__main__":
    main()
