"""A fleet of three systemd test hosts running the CPU vLLM behind a real HAProxy (a fourth test
host), deployed once by site.yml, for the rolling-restart, rollback and CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import REPO_ROOT, ansible_env
from tests.harness import golden
from tests.harness.fleet_testbed import PlayRun, LocalFleet, env_prefix, run_playbook

PREFIX, PORT_BASE = env_prefix()
RESULTS_DIR = REPO_ROOT / ".cache" / f"results-{PREFIX}"


def play(testbed: LocalFleet, playbook: str, workdir: Path, cmdline: str = "", **extravars) -> PlayRun:
    return run_playbook(testbed.inventory, playbook, workdir, RESULTS_DIR, cmdline, **extravars)


def cli(testbed: LocalFleet, *args: str, json_file: Path) -> tuple[int, dict, str]:
    done = subprocess.run([str(REPO_ROOT / "tools" / "vllm-fleet"), *args, "-i", str(testbed.inventory),
                           "--json", str(json_file)], capture_output=True, text=True, timeout=1800,
                          env=ansible_env(VLLM_FLEET_RESULTS_DIR=str(RESULTS_DIR), COLUMNS="200"), check=False)
    report = json.loads(json_file.read_text()) if json_file.exists() else {}
    return done.returncode, report, done.stdout + done.stderr


# Package scope: the four hosts go once the fleet tests are done (they published ports and held
# memory the later molecule tests need).
@pytest.fixture(scope="package")
def fleet(tmp_path_factory) -> Iterator[LocalFleet]:
    os.environ["PATH"] = ansible_env()["PATH"]
    # VLLM_FLEET_ROLL_REUSE=1 keeps test hosts left by an earlier run (while working on the tests).
    reuse = os.environ.get("VLLM_FLEET_ROLL_REUSE") == "1"
    # The vLLM hosts start from the golden image (venv and model in place); the deploy below proves
    # the reuse: python_env and model change nothing there.
    testbed = LocalFleet(prefix=PREFIX, size=3, port_base=PORT_BASE, enforce_eager=True,
                         image="" if reuse else golden.ensure())
    testbed.up(fresh=not reuse)
    try:
        testbed.write_inventory(tmp_path_factory.mktemp("fleet-inventory"))
        if not reuse:
            # Check mode on the bare balancer host (no HAProxy, no python3-apt) reports the install
            # instead of failing in the apt module.
            checked = play(testbed, "playbooks/load_balancer.yml", tmp_path_factory.mktemp("lb-check"), "--check")
            assert checked.rc == 0, checked.output[-6000:]
            reported = golden.changed_tasks(checked.events, ("load_balancer",))
            assert any(": load_balancer : Install HAProxy" in task or "would install HAProxy" in task
                       for task in reported), checked.output[-3000:]
        deployed = play(testbed, "site.yml", tmp_path_factory.mktemp("fleet-deploy"))
        assert deployed.rc == 0, deployed.output[-8000:]
        if not reuse:
            assert golden.changed_tasks(deployed.events) == [], "the golden hosts were not converged"
        yield testbed
    finally:
        if not reuse:
            testbed.down()
