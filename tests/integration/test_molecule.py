"""The roles' molecule scenarios: check -> converge -> idempotence -> verify on podman systemd hosts.
Hosts that need a converged venv and model start from the golden image (tests/harness/golden.py),
and python_env and model must then change nothing, in check mode or converge: the image is proven
converged, not assumed. The bare-host path is the e2e first deploy."""

from __future__ import annotations

import pytest

from tests.conftest import assert_molecule_scenario_passes, changed_role_tasks
from tests.harness import golden


def golden_scenario(scenario: str) -> str:
    output = assert_molecule_scenario_passes(scenario, VLLM_FLEET_MOLECULE_IMAGE=golden.ensure())
    assert changed_role_tasks(output, golden.CONVERGED_ROLES) == []
    return output


# Scenarios whose own check is in their verify step; the marker shows the role under test ran.
@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "marker"), [
    ("python_env", "TASK [python_env : Install the pinned packages]"),
    ("vllm_service", "TASK [python_env : Install the pinned packages]"),
    ("verify", "coherence: 1/1 cases matched"),
    ("load_balancer", "TASK [load_balancer : "),
], ids=["python_env", "vllm_service", "verify", "load_balancer"])
def test_molecule_golden_scenario(scenario: str, marker: str):
    assert marker in golden_scenario(scenario)


@pytest.mark.slow
def test_molecule_vllm_scenario():
    output = golden_scenario("vllm")
    # converge patched the venv; idempotence (checked by molecule) found nothing more to do
    assert "TASK [vllm : Patch the installed packages]" in output
    assert changed_role_tasks(output, ("vllm",)) == ["vllm : Copy the patch series to the host",
                                                      "vllm : Patch the installed packages"]


@pytest.mark.slow
def test_molecule_model_scenario():
    output = assert_molecule_scenario_passes("model", VLLM_FLEET_MOLECULE_IMAGE=golden.ensure())
    # converge placed the new set; idempotence (checked by molecule) found it placed
    assert "model : Download, verify and place the model set, then switch current to it" in \
        changed_role_tasks(output, ("model",))
