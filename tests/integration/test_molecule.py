"""The vllm_service molecule scenario: check -> converge -> idempotence -> verify on a podman
systemd host with a real CPU vLLM."""

from __future__ import annotations

import pytest

from tests.conftest import run


@pytest.mark.slow
def test_molecule_vllm_service_scenario():
    result = run(["molecule", "test", "-s", "vllm_service"], timeout=1800)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    for step in ("check", "converge", "idempotence", "verify"):
        assert f"Running vllm_service > {step}" in output or f"vllm_service ➜ {step}" in output, step
    assert "Idempotence completed successfully" in output
