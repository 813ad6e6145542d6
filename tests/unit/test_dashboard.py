"""vllm-fleet dashboard: the Grafana dashboard's panels drawn from Prometheus range queries, against a
local server answering with range queries recorded from the local test host's Prometheus 2.42
(tests/fixtures/prometheus/query_range.json), checked in the PNG itself."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from PIL import Image

from vllm_fleet import dashboard
from vllm_fleet.png import SERIES_KEY

from tests.conftest import REPO_ROOT

DASHBOARD = REPO_ROOT / "files" / "monitoring" / "grafana-dashboard.json"
RECORDED = json.loads((REPO_ROOT / "tests" / "fixtures" / "prometheus" / "query_range.json").read_text())
HOST = "vllm-fleet-local"


class RangeAnswers(BaseHTTPRequestHandler):
    answers: dict = RECORDED["answers"]

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        if url.path != "/api/v1/query_range" or not {"start", "end", "step"} <= set(params):
            self.send_error(404)
            return
        expr = params["query"][0]
        body = self.answers.get(expr, {"status": "success", "data": {"resultType": "matrix", "result": []}})
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args) -> None:
        pass


class NoData(RangeAnswers):
    answers: dict = {}


def serve(handler: type) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def prometheus() -> Iterator[str]:
    yield from serve(RangeAnswers)


@pytest.fixture
def empty_prometheus() -> Iterator[str]:
    yield from serve(NoData)


def recorded_end() -> str:
    """The last sample time of the recording: the range drawn must hold it, whenever the test runs."""
    last = max(float(stamp) for answer in RECORDED["answers"].values() for series in answer["data"]["result"]
               for stamp, _value in series["values"])
    return datetime.fromtimestamp(last, timezone.utc).isoformat()


def test_every_panel_is_drawn_with_the_series_prometheus_returned(prometheus: str, tmp_path: Path, capsys):
    out = tmp_path / "dashboard.png"
    assert dashboard.main(["--prometheus", prometheus, "--minutes", "10", "--end", recorded_end(),
                           "--out", str(out)], DASHBOARD) == 0
    image = Image.open(out)
    assert image.size == (1600, 1020)  # 16 x (32 grid rows x 0.3 + 0.6) inches at 100 dpi
    drawn = json.loads(image.text[SERIES_KEY])
    titles = [panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"]]
    assert sorted(drawn) == sorted(titles)
    # legends as the dashboard's legendFormat says, values as Prometheus answered them
    assert set(drawn["TTFT p50 / p99"]) == {f"p50 {HOST}", f"p99 {HOST}"}
    assert set(drawn["Requests running / waiting"]) == {f"running {HOST}", f"waiting {HOST}"}
    expr = 'vllm_fleet:output_tok_s:rate5m{host=~".*"}'
    [recorded] = RECORDED["answers"][expr]["data"]["result"]
    assert drawn["Output tokens/s"][HOST] == [[float(stamp), float(value)] for stamp, value in recorded["values"]]
    assert f"{len(titles)} of {len(titles)} panels with data" in capsys.readouterr().out
    # matplotlib's first line colour (C0) is on the canvas: lines were drawn, not only axes
    rgb = image.convert("RGB")
    assert sum(count for count, colour in rgb.getcolors(maxcolors=1 << 20) if colour == (0x1F, 0x77, 0xB4)) > 2000


def test_a_range_in_the_past_is_asked_for_and_drawn(tmp_path: Path):
    asked: list[dict[str, list[str]]] = []

    class Recording(RangeAnswers):
        def do_GET(self) -> None:  # noqa: N802
            asked.append(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query))
            super().do_GET()

    for url in serve(Recording):
        assert dashboard.main(["--prometheus", url, "--minutes", "30", "--end", "2026-12-04T12:48:00",
                               "--out", str(tmp_path / "d.png")], DASHBOARD) == 0
    end = datetime(2026, 12, 4, 12, 48, tzinfo=timezone.utc).timestamp()  # a naive time is UTC
    assert {(float(query["start"][0]), float(query["end"][0])) for query in asked} == {(end - 1800, end)}


def test_the_host_regex_goes_into_every_query(tmp_path: Path):
    asked: list[str] = []

    class Recording(RangeAnswers):
        def do_GET(self) -> None:  # noqa: N802
            asked.append(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0])
            super().do_GET()

    for url in serve(Recording):
        dashboard.main(["--prometheus", url, "--hosts", "gpu-0[12]", "--out", str(tmp_path / "d.png")], DASHBOARD)
    assert len(asked) == sum(len(panel["targets"]) for panel in json.loads(DASHBOARD.read_text())["panels"])
    assert all('host=~"gpu-0[12]"' in expr and "$host" not in expr for expr in asked)


def test_no_data_draws_nothing_and_says_so(empty_prometheus: str, tmp_path: Path, capsys):
    out = tmp_path / "dashboard.png"
    assert dashboard.main(["--prometheus", empty_prometheus, "--out", str(out)], DASHBOARD) == 1
    assert "has no data for any panel" in capsys.readouterr().out and not out.exists()


def test_an_unreachable_prometheus_is_named(tmp_path: Path, capsys):
    out = tmp_path / "dashboard.png"
    assert dashboard.main(["--prometheus", "http://127.0.0.1:9", "--out", str(out)], DASHBOARD) == 2
    assert "cannot ask Prometheus: http://127.0.0.1:9" in capsys.readouterr().out and not out.exists()


@pytest.mark.parametrize(("template", "metric", "label"), [
    ("p99 {{host}}", {"host": "gpu-01"}, "p99 gpu-01"),
    ("{{finished_reason}} {{ host }}", {"host": "gpu-01", "finished_reason": "length"}, "length gpu-01"),
    ("", {"host": "gpu-01"}, '{"host": "gpu-01"}'),
])
def test_legends_follow_grafanas_legend_format(template: str, metric: dict, label: str):
    assert dashboard.legend(template, metric) == label
