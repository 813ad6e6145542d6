"""The molecule scenarios that run against the host the e2e first deploy converged (they provision
nothing; this module runs first among the e2e tests, on the host as that deploy left it).
vllm_service: its check, converge and idempotence steps must leave the host exactly as it was (same
service process, same unit, env file and releases), and its verify step checks the real service.
verify: converge and idempotence each measure the service and record the run, without touching it."""

from __future__ import annotations

import pytest

from tests.conftest import assert_molecule_scenario_passes, changed_role_tasks
from tests.e2e.conftest import API_KEY, API_PORT, SSH_PORT, PlayRun, on_host

pytestmark = pytest.mark.slow

DEPLOY_ROLES = ("python_env", "vllm", "model", "vllm_service")
# What a deploy makes on the host; a change to any of it (or a restart) shows in this listing.
SCENARIO_ENV = {"VLLM_FLEET_MOLECULE_SSH_PORT": str(SSH_PORT), "VLLM_FLEET_MOLECULE_API_PORT": str(API_PORT),
                "VLLM_FLEET_MOLECULE_API_KEY": API_KEY}
HOST_STATE = r"""
systemctl show vllm --property=MainPID,ActiveEnterTimestampMonotonic,NRestarts
sha256sum /etc/systemd/system/vllm.service /etc/vllm-fleet/* 2>&1
find /etc/systemd/system/vllm.service.d /opt/vllm-fleet /var/lib/vllm-fleet/models -maxdepth 3 \
  -printf '%p %l %s %T@\n' 2>&1 | sort
"""


# It leaves the host as it is (asserted below), so it runs while the golden image is captured.
def test_vllm_service_scenario_changes_nothing_on_the_deployed_host(deployed_unchanged: PlayRun):
    before = on_host(HOST_STATE)
    output = assert_molecule_scenario_passes("vllm_service", **SCENARIO_ENV)
    assert "TASK [vllm_service : " in output and "Ask for a real completion with the API key" in output
    assert changed_role_tasks(output, DEPLOY_ROLES) == []
    assert on_host(HOST_STATE) == before


def test_verify_scenario_measures_the_deployed_host_without_touching_it(deployed: PlayRun):
    before = on_host(HOST_STATE)
    output = assert_molecule_scenario_passes("verify", **SCENARIO_ENV)
    assert "coherence: 1/1 cases matched" in output
    assert on_host(HOST_STATE) == before
