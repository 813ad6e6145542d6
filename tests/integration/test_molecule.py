"""The vllm_service molecule scenario: check -> converge -> idempotence -> verify on a podman
systemd host with a real CPU vLLM. The host starts from the golden image (venv and demo model in
place, no service): python_env and model must change nothing there, in check mode or converge."""

from __future__ import annotations

import pytest

from tests.conftest import assert_molecule_scenario_passes, changed_role_tasks
from tests.harness import golden


@pytest.mark.slow
def test_molecule_vllm_service_scenario():
    output = assert_molecule_scenario_passes("vllm_service", VLLM_FLEET_MOLECULE_IMAGE=golden.ensure())
    assert "TASK [python_env : Install the pinned packages]" in output
    assert changed_role_tasks(output, golden.CONVERGED_ROLES) == []
