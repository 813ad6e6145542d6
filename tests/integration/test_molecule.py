"""The vllm_service molecule scenario: check -> converge -> idempotence -> verify on a podman
systemd host with a real CPU vLLM."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import REPO_ROOT, run

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SUMMARY = re.compile(r"vllm_service\s+: actions=(\d+)\s+successful=(\d+)\s+.*failed=(\d+)")


@pytest.mark.slow
def test_molecule_vllm_service_scenario():
    scenario = yaml.safe_load((REPO_ROOT / "molecule" / "vllm_service" / "molecule.yml").read_text())
    sequence = scenario["scenario"]["test_sequence"]
    assert [s for s in sequence if s in ("check", "converge", "idempotence", "verify")] == [
        "check", "converge", "idempotence", "verify"]
    result = run(["molecule", "test", "-s", "vllm_service"], timeout=1800)
    output = ANSI.sub("", result.stdout + result.stderr)
    assert result.returncode == 0, output[-8000:]
    # Molecule's closing summary: every action of the sequence ran and succeeded.
    summary = SUMMARY.search(output)
    assert summary, output[-3000:]
    actions, successful, failed = map(int, summary.groups())
    assert actions == successful == len(sequence) and failed == 0, summary.group(0)
