"""The roles' molecule scenarios: check -> converge -> idempotence -> verify on podman systemd hosts.
Hosts that need a converged venv and model start from the golden image (tests/harness/golden.py),
and python_env and model must then change nothing, in check mode or converge: the image is proven
converged, not assumed. The bare-host path is the e2e first deploy; the vllm_service and verify
scenarios run against that deploy's host (tests/e2e/test_molecule_on_deployed_host.py), the
load_balancer one against the fleet's (tests/fleet/test_molecule_load_balancer.py)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_molecule_scenario_passes, changed_role_tasks
from tests.harness import golden


def golden_scenario(scenario: str) -> str:
    output = assert_molecule_scenario_passes(scenario, VLLM_FLEET_MOLECULE_IMAGE=golden.ensure())
    assert changed_role_tasks(output, golden.CONVERGED_ROLES) == []
    return output


# Its own check is in its verify step; the marker shows the role under test ran.
@pytest.mark.slow
def test_molecule_python_env_scenario():
    assert "TASK [python_env : Install the pinned packages]" in golden_scenario("python_env")


@pytest.mark.slow
def test_molecule_vllm_scenario():
    output = golden_scenario("vllm")
    # converge patched the venv; idempotence (checked by molecule) found nothing more to do
    assert "TASK [vllm : Patch the installed packages in a clone of the pinned venv]" in output
    assert changed_role_tasks(output, ("vllm",)) == ["vllm : Copy the patch series to the host",
                                                     "vllm : Patch the installed packages in a clone of the pinned venv"]


@pytest.mark.slow
def test_molecule_model_scenario():
    output = assert_molecule_scenario_passes("model", VLLM_FLEET_MOLECULE_IMAGE=golden.ensure())
    # converge placed the new set; idempotence (checked by molecule) found it placed
    assert "model : Download, verify and place the model set, then switch current to it" in \
        changed_role_tasks(output, ("model",))
