"""module_utils/prometheus.py: a host's figures from Prometheus's query API, against a local server
that answers with responses of the e2e test host's Prometheus 2.42 (tests/fixtures/prometheus/)."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils import prometheus

from tests.conftest import REPO_ROOT

RECORDED = json.loads((REPO_ROOT / "tests" / "fixtures" / "prometheus" / "queries.json").read_text())


class Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        expr = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0]
        body = RECORDED.get(expr, {"status": "error", "errorType": "bad_data", "error": f"parse error in {expr}"})
        payload = json.dumps(body).encode()
        self.send_response(200 if body["status"] == "success" else 400)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_recorded_hosts_figures(server: str):
    figures = prometheus.host_figures(server, RECORDED["_host"])
    assert set(figures) == {*prometheus.FIGURES, "alerts"}
    assert figures["output_tok_s"] is not None and figures["output_tok_s"] >= 0
    assert figures["kv_cache_usage"] is not None and 0 <= figures["kv_cache_usage"] <= 1
    assert figures["alerts"] == RECORDED["_alerts"]
    line = prometheus.summary_line(figures)
    assert "tok/s out" in line and f"alerts: {', '.join(RECORDED['_alerts']) or 'none'}" in line


def test_an_idle_hosts_latency_is_none_not_nan():
    assert prometheus.scalar([{"metric": {}, "value": [1.0, "NaN"]}]) is None
    assert prometheus.scalar([]) is None
    assert prometheus.scalar([{"metric": {}, "value": [1.0, "0.25"]}]) == 0.25


def test_a_refused_query_and_no_server_are_named(server: str):
    with pytest.raises(prometheus.PrometheusError, match="parse error in up{"):
        prometheus.query(server, "up{")
    with pytest.raises(prometheus.PrometheusError, match="http://127.0.0.1:9: "):
        prometheus.query("http://127.0.0.1:9", "up", timeout=2)
