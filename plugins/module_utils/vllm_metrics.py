"""Read vLLM's Prometheus /metrics and wait until a server has no requests in flight.

vLLM exports `vllm:num_requests_running` and `vllm:num_requests_waiting` gauges, one sample per
engine and model. A host taken out of its load balancer is drained when both are 0 everywhere.
The gauges are only refreshed when the engine runs a step, so after an abort they can keep their
last values on an idle server: when the token counters stop moving for `stall_seconds`, the
server is taken as idle (the graceful stop's --shutdown-timeout still covers a request in flight).
"""

from __future__ import annotations

import re
import time
import urllib.error
from dataclasses import dataclass
from typing import Callable

from .vllm_http import Endpoint

IN_FLIGHT_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
TOKEN_COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
# name{labels} value [timestamp]
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass
class InFlight:
    running: float
    waiting: float
    tokens: float = 0.0  # prompt + generated tokens so far: moves while anything is processed

    @property
    def total(self) -> float:
        return self.running + self.waiting


@dataclass
class DrainOutcome:
    drained: bool
    waited_s: float
    polls: int
    last: InFlight | None
    reason: str


def gauge_sum(text: str, name: str, model: str | None = None) -> float | None:
    """Sum of a metric's samples (of one model_name when given); None when the metric is absent."""
    total, seen = 0.0, False
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if not match or match["name"] != name:
            continue
        labels = {m["key"]: m["value"] for m in LABEL.finditer(match["labels"] or "")}
        if model is not None and labels.get("model_name", model) != model:
            continue
        total += float(match["value"])
        seen = True
    return total if seen else None


def in_flight(text: str, model: str | None = None) -> InFlight | None:
    """Requests running and waiting; None when the server exports no such gauge (stats disabled)."""
    running, waiting = (gauge_sum(text, name, model) for name in IN_FLIGHT_GAUGES)
    if running is None:
        return None
    tokens = sum(gauge_sum(text, name, model) or 0.0 for name in TOKEN_COUNTERS)
    return InFlight(running, waiting or 0.0, tokens)


def fetch_metrics(endpoint: Endpoint, timeout: float = 5.0) -> str:
    with endpoint.open("/metrics", timeout=timeout) as response:
        return response.read().decode()


def refused(error: Exception) -> bool:
    """The server is not listening (stopped): nothing can be in flight."""
    reason = getattr(error, "reason", error)
    return isinstance(reason, ConnectionRefusedError) or isinstance(error, ConnectionRefusedError)


def wait_until_idle(
    endpoint: Endpoint, model: str | None, timeout: float, interval: float = 0.5, stall_seconds: float = 10.0,
    fetch: Callable[[Endpoint], str] = fetch_metrics, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainOutcome:
    """Poll /metrics until nothing runs or waits, the server is not listening, or timeout passes.

    An HTTP error from /metrics is raised (the wait cannot tell); a slow answer is polled again.
    """
    started = clock()
    polls = 0
    last: InFlight | None = None
    moved_at, last_tokens = started, None
    while True:
        polls += 1
        now = clock()
        try:
            last = in_flight(fetch(endpoint), model)
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            if refused(error):
                return DrainOutcome(True, now - started, polls, last, "server not listening: nothing in flight")
            if now - started >= timeout:
                return DrainOutcome(False, now - started, polls, last, f"/metrics not answering after {timeout:g} s")
            sleep(interval)
            continue
        if last is None:
            return DrainOutcome(True, now - started, polls, None,
                                "no request gauges in /metrics (stats disabled): relying on the balancer's drain")
        if last.total == 0:
            return DrainOutcome(True, now - started, polls, last, "no requests running or waiting")
        if last_tokens is None or last.tokens != last_tokens:
            moved_at, last_tokens = now, last.tokens
        elif now - moved_at >= stall_seconds:
            return DrainOutcome(True, now - started, polls, last,
                                f"gauges say {last.running:g} running / {last.waiting:g} waiting, but no token "
                                f"was processed for {stall_seconds:g} s: stale gauges, taken as idle")
        if now - started >= timeout:
            return DrainOutcome(False, now - started, polls, last,
                                f"{last.running:g} running and {last.waiting:g} waiting after {timeout:g} s")
        sleep(interval)
