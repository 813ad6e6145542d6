"""Connect to a vLLM server before measuring it: wait for /health, then check /v1/models lists the
model, and give the OpenAI client the benchmarks use."""

from __future__ import annotations

import time
from typing import Any, Callable

from .vllm_http import Endpoint


class ProbeError(Exception):
    """The service is not serving as it should; the message says what failed."""


def wait_for_health(
    base_url: str,
    api_key: str,
    timeout: float,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Seconds until /health answered 200; ProbeError once timeout has passed."""
    endpoint = Endpoint(base_url, api_key, timeout=min(10.0, max(interval, 1.0)))
    url = endpoint.url("/health")
    started = clock()
    last: int | None = None
    while True:
        last = endpoint.request("/health").status
        if last == 200:
            return clock() - started
        if clock() - started >= timeout:
            seen = "no answer" if last is None else f"HTTP {last}"
            raise ProbeError(f"{url} not healthy after {timeout:.0f} s ({seen})")
        sleep(interval)


def make_client(base_url: str, api_key: str, timeout: float) -> Any:
    from openai import OpenAI  # imported late: only the controller needs the client

    return OpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0)


def served_model_ids(client: Any) -> list[str]:
    return [model.id for model in client.models.list().data]


def connect(
    base_url: str, model: str, api_key: str, health_timeout: float, request_timeout: float, client: Any = None,
) -> tuple[Any, list[str], float]:
    """Wait for /health, then check /v1/models lists model: the client, the served ids, seconds waited."""
    waited = wait_for_health(base_url, api_key, health_timeout)
    client = client or make_client(base_url, api_key, request_timeout)
    models = served_model_ids(client)
    if model not in models:
        raise ProbeError(f"/v1/models at {base_url} lists {models}, not {model!r}")
    return client, models, waited
