"""The Prometheus that site.yml put on the test host (inventory/local: group monitoring) scrapes
vLLM and the node exporter; what the rules and the dashboard read is what it really returns."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from PIL import Image

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint
from tests.conftest import REPO_ROOT
from tests.e2e.conftest import (API_KEY, API_URL, SSH_PORT, PlayRun, prometheus_query, run_playbook,
                                wait_for_series)
from tests.harness.loadgen import one_request

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


def test_the_dashboard_is_drawn_from_the_hosts_prometheus(deployed: PlayRun, tmp_path: Path):
    """`vllm-fleet dashboard --via` opens an SSH tunnel to the loopback-only Prometheus (what an
    operator would do by hand) and draws every panel with the host's series."""
    # Prometheus's first scrape of vLLM often comes after site.yml's verify: traffic the rates see
    endpoint = Endpoint(API_URL, API_KEY, timeout=60)
    served = [one_request(endpoint, "demo", prompt, 8) for prompt in ("Rivers", "Mountains", "Lakes")]
    assert all(ok for ok, _tokens, _error in served), served
    wait_for_series(f'vllm_fleet:output_tok_s:rate5m{{host="{INVENTORY_HOST}"}} > 0', 60)
    out = tmp_path / "dashboard.png"
    ssh_options = [f"IdentityFile={REPO_ROOT / '.cache' / 'testhost' / 'id_ed25519'}", "StrictHostKeyChecking=no",
                   "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"]
    drawn = subprocess.run([str(REPO_ROOT / "tools" / "vllm-fleet"), "dashboard", "--via", f"ssh://root@127.0.0.1:{SSH_PORT}",
                            *(f"--ssh-option={option}" for option in ssh_options), "--minutes", "120", "--out", str(out)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    panels = json.loads(Image.open(out).text["vllm-fleet-series"])
    titles = [panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"]]
    assert sorted(panels) == sorted(titles)
    without_host = [title for title, series in panels.items() if not any(INVENTORY_HOST in label for label in series)]
    assert without_host == [], drawn.stdout
    # the verify's requests: finished requests were counted, so some rate was above zero
    finished = panels["Finished requests/s by reason"]
    assert max(value for points in finished.values() for _stamp, value in points) > 0
    print(f"\n[dashboard] {drawn.stdout.strip()}")


def test_status_shows_the_hosts_figures_from_prometheus(deployed: PlayRun, tmp_path):
    run = run_playbook(tmp_path, "playbooks/status.yml")
    assert run.rc == 0 and run.changed == 0, run.output[-3000:]
    live = run.task_result("Ask the monitoring host's Prometheus")
    assert set(live["figures"]) >= {"output_tok_s", "ttft_p99_s", "kv_cache_usage", "requests_waiting", "alerts"}
    assert live["figures"]["kv_cache_usage"] is not None and live["figures"]["unit_restarts_1h"] is not None
    assert f"{INVENTORY_HOST} now: " in run.output and "tok/s out" in live["summary"]
    print(f"\n[status] {live['summary']}")
