"""A vLLM host's current figures from the Prometheus of the monitoring role (its recording rules).

Standard library only: it runs on the monitoring host inside an Ansible module, where Prometheus
listens on the loopback address by default.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
from typing import Any

from ansible.module_utils.urls import open_url

# figure -> PromQL for one host (HOST is replaced by the host's label value, quoted)
FIGURES = {
    "output_tok_s": 'vllm_fleet:output_tok_s:rate5m{host=HOST}',
    "decode_tok_s": 'vllm_fleet:decode_tok_s:rate5m{host=HOST}',
    "ttft_p99_s": 'vllm_fleet:ttft_seconds:p99_5m{host=HOST}',
    "kv_cache_usage": 'max(vllm:kv_cache_usage_perc{host=HOST})',
    "requests_running": 'sum(vllm:num_requests_running{host=HOST})',
    "requests_waiting": 'sum(vllm:num_requests_waiting{host=HOST})',
    "unit_restarts_1h": 'sum(increase(node_systemd_service_restart_total{host=HOST}[1h]))',
}
FIRING_ALERTS = 'ALERTS{alertstate="firing", host=HOST}'


class PrometheusError(Exception):
    """Prometheus could not be asked, or refused the query; the message says which."""


def query(base_url: str, expr: str, timeout: float = 10.0) -> list[dict[str, Any]]:
    """An instant query: a list of {"metric": {...}, "value": [time, "value"]}."""
    return api(base_url, "query", {"query": expr}, timeout)


def query_range(base_url: str, expr: str, start: float, end: float, step: float,
                timeout: float = 30.0) -> list[dict[str, Any]]:
    """A range query: a list of {"metric": {...}, "values": [[time, "value"], ...]}."""
    return api(base_url, "query_range", {"query": expr, "start": start, "end": end, "step": step}, timeout)


def api(base_url: str, endpoint: str, params: dict[str, Any], timeout: float) -> list[dict[str, Any]]:
    url = f"{base_url.rstrip('/')}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
    try:
        with open_url(url, timeout=timeout) as answer:
            body = json.load(answer)
    except urllib.error.HTTPError as error:  # 400/422: Prometheus says why in its JSON body
        body = json.loads(error.read() or b"{}")
    except (OSError, ValueError) as error:
        raise PrometheusError(f"{base_url}: {error}") from error
    if body.get("status") != "success":
        raise PrometheusError(f"{base_url}: {params['query']}: {body.get('error', body)}")
    return body["data"]["result"]


def scalar(result: list[dict[str, Any]]) -> float | None:
    """The value of a one-series instant vector; None when empty or not a number (0/0 when idle)."""
    if not result:
        return None
    value = float(result[0]["value"][1])
    return None if math.isnan(value) or math.isinf(value) else round(value, 4)


def for_host(expr: str, host: str) -> str:
    return expr.replace("HOST", json.dumps(host))


def host_figures(base_url: str, host: str) -> dict[str, Any]:
    figures: dict[str, Any] = {name: scalar(query(base_url, for_host(expr, host))) for name, expr in FIGURES.items()}
    figures["alerts"] = sorted({series["metric"]["alertname"] for series in query(base_url, for_host(FIRING_ALERTS, host))})
    return figures


def summary_line(figures: dict[str, Any]) -> str:
    def show(value: float | None, fmt: str) -> str:
        return "-" if value is None else fmt.format(value)

    return (f"{show(figures['output_tok_s'], '{:.1f}')} tok/s out, decode {show(figures['decode_tok_s'], '{:.1f}')} tok/s, "
            f"TTFT p99 {show(figures['ttft_p99_s'], '{:.3f}')} s, KV {show(figures['kv_cache_usage'], '{:.0%}')}, "
            f"{show(figures['requests_running'], '{:.0f}')} running / {show(figures['requests_waiting'], '{:.0f}')} waiting, "
            f"{show(figures['unit_restarts_1h'], '{:.0f}')} restarts in 1 h, alerts: {', '.join(figures['alerts']) or 'none'}")
