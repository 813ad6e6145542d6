"""The load_balancer molecule scenario against the fleet site.yml deployed (it provisions nothing and
uses the fleet's inventory): check mode and converge change nothing on the balancer (same HAProxy
process, same configuration), and verify sees every member UP and a completion through HAProxy.
This module runs before the rolling tests, on the fleet as its deploy left it."""

from __future__ import annotations

import pytest

from tests.conftest import assert_molecule_scenario_passes, changed_role_tasks
from tests.harness.fleet_testbed import LocalFleet, on

pytestmark = pytest.mark.slow

BALANCER_STATE = ("systemctl show haproxy --property=MainPID,ActiveEnterTimestampMonotonic; "
                  "find /etc/haproxy -type f -exec sha256sum {} + | sort")


def test_load_balancer_scenario_changes_nothing_on_the_deployed_fleet(fleet: LocalFleet):
    before = on(fleet.lb, BALANCER_STATE)
    output = assert_molecule_scenario_passes("load_balancer", VLLM_FLEET_MOLECULE_INVENTORY=str(fleet.inventory))
    assert "TASK [load_balancer : " in output
    assert changed_role_tasks(output, ("load_balancer",)) == []
    assert on(fleet.lb, BALANCER_STATE) == before
