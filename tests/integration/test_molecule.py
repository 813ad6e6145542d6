"""The vllm_service molecule scenario: check -> converge -> idempotence -> verify on a podman
systemd host with a real CPU vLLM."""

from __future__ import annotations

import pytest

from tests.conftest import assert_molecule_scenario_passes


@pytest.mark.slow
def test_molecule_vllm_service_scenario():
    assert_molecule_scenario_passes("vllm_service")
