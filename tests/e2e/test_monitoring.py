"""The Prometheus that site.yml put on the test host (inventory/local: group monitoring) scrapes
vLLM and the node exporter; what the rules and the dashboard read is what it really returns."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from tests.conftest import REPO_ROOT
from tests.e2e.conftest import API_KEY, API_URL, PlayRun, prometheus_query, run_playbook, wait_for_series

pytestmark = pytest.mark.slow

RULES = REPO_ROOT / "roles" / "monitoring" / "templates" / "vllm-fleet.rules.yml.j2"
# the test host's name in inventory/local, which every target carries as its host label
INVENTORY_HOST = "vllm-fleet-local"
DASHBOARD = REPO_ROOT / "files" / "monitoring" / "grafana-dashboard.json"


def test_prometheus_scrapes_vllm_and_the_node_exporter(deployed: PlayRun):
    up = wait_for_series('up{job=~"vllm|node"} == 1', 30, lambda result: len(result) == 2)[0]
    assert {(series["metric"]["job"], series["metric"]["host"]) for series in up} == {("vllm", INVENTORY_HOST),
                                                                                      ("node", INVENTORY_HOST)}
    # site.yml's verify ran after Prometheus started: its requests are counted, as vLLM itself counts them
    served = prometheus_query('sum(vllm:request_success_total{host="%s"})' % INVENTORY_HOST)
    request = urllib.request.Request(API_URL.removesuffix("/v1") + "/metrics", headers={"Authorization": f"Bearer {API_KEY}"})
    exported = urllib.request.urlopen(request, timeout=30).read().decode()
    counted = sum(float(value) for value in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", exported, re.M))
    assert served and 0 < float(served[0]["value"][1]) <= counted
    print(f"\n[prometheus] {float(served[0]['value'][1]):.0f} requests counted (vLLM says {counted:.0f} now)")


def test_every_metric_the_rules_read_is_one_prometheus_returns(deployed: PlayRun):
    names = {series["metric"]["__name__"] for series in prometheus_query(
        'count by (__name__) ({__name__=~"vllm:.*|node_systemd_.*"})')}
    used = set(re.findall(r"\b((?:vllm:|node_systemd_)[a-z_:]+)", RULES.read_text()))
    assert used and used <= names, sorted(used - names)
    restarts = prometheus_query('node_systemd_service_restart_total{name="vllm.service"}')
    assert [series["metric"]["host"] for series in restarts] == [INVENTORY_HOST]


def test_every_dashboard_panel_returns_series(deployed: PlayRun):
    """Each query of the Grafana dashboard, for every host, answers with data from this Prometheus."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"].replace("$host", ".*") for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(queries) >= 8
    # the rate() and recording-rule panels need two scrapes of the same counters: a few intervals
    empty = [query for query in queries if not wait_for_series(query, 30)[0]]
    assert empty == [], empty


def test_status_shows_the_hosts_figures_from_prometheus(deployed: PlayRun, tmp_path):
    run = run_playbook(tmp_path, "playbooks/status.yml")
    assert run.rc == 0 and run.changed == 0, run.output[-3000:]
    live = run.task_result("Ask the monitoring host's Prometheus")
    assert set(live["figures"]) >= {"output_tok_s", "ttft_p99_s", "kv_cache_usage", "requests_waiting", "alerts"}
    assert live["figures"]["kv_cache_usage"] is not None and live["figures"]["unit_restarts_1h"] is not None
    assert f"{INVENTORY_HOST} now: " in run.output and "tok/s out" in live["summary"]
    print(f"\n[status] {live['summary']}")
