"""The vllm_service molecule scenario: check -> converge -> idempotence -> verify on a podman
systemd host with a real CPU vLLM."""

from __future__ import annotations

import re

import pytest

from tests.conftest import run

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.slow
def test_molecule_vllm_service_scenario():
    result = run(["molecule", "test", "-s", "vllm_service"], timeout=1800)
    output = ANSI.sub("", result.stdout + result.stderr)
    assert result.returncode == 0, output[-8000:]
    for step in ("check", "converge", "idempotence", "verify"):
        assert f"vllm_service ➜ {step}: Executed: Successful" in output, f"{step} did not run: {output[-3000:]}"
