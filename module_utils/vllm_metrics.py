"""Read vLLM's Prometheus /metrics and wait until a server has no requests in flight.

vLLM exports `vllm:num_requests_running` and `vllm:num_requests_waiting` gauges, one sample per
engine and model. A host taken out of its load balancer is drained when both are 0 everywhere.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

IN_FLIGHT_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
# name{labels} value [timestamp]
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass
class InFlight:
    running: float
    waiting: float

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
    """Sum of a gauge's samples (of one model_name when given); None when the gauge is absent."""
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


def in_flight(text: str, model: str | None = None) -> InFlight:
    running, waiting = (gauge_sum(text, name, model) for name in IN_FLIGHT_GAUGES)
    if running is None:
        raise ValueError(f"no {IN_FLIGHT_GAUGES[0]} in the metrics: is this a vLLM server?")
    return InFlight(running, waiting or 0.0)


def fetch_metrics(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def wait_until_idle(
    url: str, model: str | None, timeout: float, interval: float = 0.5,
    fetch: Callable[[str], str] = fetch_metrics, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainOutcome:
    """Poll /metrics until nothing runs or waits, the server stops answering, or timeout passes."""
    started = clock()
    polls = 0
    last: InFlight | None = None
    while True:
        polls += 1
        try:
            last = in_flight(fetch(url), model)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
            return DrainOutcome(True, clock() - started, polls, last, f"server not answering ({error}): nothing in flight")
        if last.total == 0:
            return DrainOutcome(True, clock() - started, polls, last, "no requests running or waiting")
        if clock() - started >= timeout:
            return DrainOutcome(False, clock() - started, polls, last,
                                f"{last.running:g} running and {last.waiting:g} waiting after {timeout:g} s")
        sleep(interval)
