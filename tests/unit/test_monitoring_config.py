"""The monitoring role's prometheus.yml, rendered for an inventory, through `promtool check config`:
whose address each target is."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.unit.test_monitoring_rules import promtool, render_template

FACTS = {"gpu1": "10.0.0.11", "gpu2": "10.0.0.12", "lb1": "10.0.0.21"}


def render_config(target_names: dict[str, str]) -> str:
    hostvars = {host: {"ansible_facts": {"default_ipv4": {"address": address}}} for host, address in FACTS.items()}
    for host, name in target_names.items():
        hostvars[host]["monitoring_target_address"] = name
    return render_template("prometheus.yml.j2", {
        "monitoring_vllm_port": 8000, "monitoring_vllm_api_key": "", "monitoring_balancer_metrics_port": 8405,
        "groups": {"vllm_hosts": ["gpu1", "gpu2"], "load_balancers": ["lb1"], "gpu_hosts": ["gpu1", "gpu2"]},
        "hostvars": hostvars, "inventory_hostname": "gpu1",
    })


def targets(config: str) -> dict[str, list[str]]:
    jobs = yaml.safe_load(config)["scrape_configs"]
    return {job["job_name"]: [target for group in job["static_configs"] for target in group["targets"]]
            for job in jobs}


@pytest.fixture
def checked(tmp_path: Path):
    def check(config: str) -> str:
        (tmp_path / "prometheus.yml").write_text(config)
        done = promtool("check", "config", "--syntax-only", str(tmp_path / "prometheus.yml"))
        assert done.returncode == 0, done.stdout + done.stderr
        return config
    return check


def test_targets_are_the_addresses_the_facts_had(checked):
    jobs = targets(checked(render_config({})))
    assert jobs["vllm"] == ["10.0.0.11:8000", "10.0.0.12:8000"]
    assert jobs["node"] == ["127.0.0.1:9100", "10.0.0.12:9100"]  # its own exporter on the loopback
    assert jobs["haproxy"] == ["10.0.0.21:8405"]
    assert jobs["dcgm"] == ["10.0.0.11:9400", "10.0.0.12:9400"]


def test_a_hosts_target_address_name_replaces_its_address_in_every_job(checked):
    """A name follows the host to a new address (a reboot under DHCP) without the play running again."""
    jobs = targets(checked(render_config({"gpu2": "gpu2.fleet.internal", "lb1": "lb1.fleet.internal"})))
    assert jobs["vllm"] == ["10.0.0.11:8000", "gpu2.fleet.internal:8000"]
    assert jobs["node"] == ["127.0.0.1:9100", "gpu2.fleet.internal:9100"]
    assert jobs["haproxy"] == ["lb1.fleet.internal:8405"]
    assert jobs["dcgm"] == ["10.0.0.11:9400", "gpu2.fleet.internal:9400"]
