"""The readiness gate: wait for vLLM to serve while watching systemd, and fail within seconds of a
crash instead of waiting out a load timeout (tens of minutes for a 400 GB model).

Ready means /health answers 200, /v1/models lists the served model, and one real completion
returns tokens: /health can answer while the engine is already dead. Standard library only.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .vllm_http import Endpoint


@dataclass
class GateResult:
    ready: bool
    seconds: float
    reason: str
    unit_state: dict = field(default_factory=dict)
    completion_tokens: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def crash_sign(baseline: Any, now: Any) -> str | None:
    """Why the unit is not on its way to ready, or None while it still may be."""
    if now.n_restarts > baseline.n_restarts:
        return f"systemd restarted it {now.n_restarts - baseline.n_restarts} time(s) (Restart=on-failure)"
    if now.active_state == "failed":
        return f"the unit failed (Result={now.result}, exit status {now.exec_main_status})"
    if now.sub_state == "auto-restart":
        return f"the unit is in auto-restart after its main process exited (status {now.exec_main_status})"
    if now.active_state in ("inactive", "deactivating"):
        return f"the unit stopped (Result={now.result}, exit status {now.exec_main_status})"
    if baseline.main_pid and now.main_pid and now.main_pid != baseline.main_pid:
        return f"its main process changed from {baseline.main_pid} to {now.main_pid}"
    return None


def probe_once(endpoint: Endpoint, model: str) -> tuple[bool, str, int]:
    """(ready, what is missing, completion tokens); a failed completion after health is fatal."""
    health = endpoint.request("/health")
    if health.status != 200:
        return False, f"/health answered {health.status or 'nothing'}", 0
    models = endpoint.request("/v1/models")
    listed = models.json() if models.status == 200 else None
    served = [m.get("id") for m in listed.get("data", [])] if isinstance(listed, dict) else []
    if model not in served:
        return False, f"/v1/models answered {models.status} listing {served}", 0
    completion = endpoint.request(
        "/v1/completions", {"model": model, "prompt": "Hello", "max_tokens": 4, "temperature": 0})
    answer = completion.json() if completion.status == 200 else None
    tokens = (answer.get("usage") or {}).get("completion_tokens", 0) if isinstance(answer, dict) else 0
    if not tokens:
        raise CompletionFailed(
            f"/health and /v1/models answered but a completion got HTTP {completion.status} with no tokens")
    return True, "ready", tokens


class CompletionFailed(Exception):
    """The server looked healthy and failed its first real request."""


def wait_until_ready(
    endpoint: Endpoint,
    model: str,
    read_state: Callable[[], Any],
    timeout: float,
    interval: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    settle: float = 3.0,
) -> GateResult:
    started = clock()
    baseline = read_state()
    last = "not probed yet"
    while True:
        now = read_state()
        sign = crash_sign(baseline, now)
        if sign:
            return GateResult(False, clock() - started, sign, asdict(now))
        try:
            ready, last, tokens = probe_once(endpoint, model)
        except CompletionFailed as failure:
            # Give systemd a moment to notice the engine's death, so the report says how it ended.
            sleep(settle)
            now = read_state()
            return GateResult(False, clock() - started, f"{failure}; unit: {now.describe()}", asdict(now))
        if ready:
            return GateResult(True, clock() - started, last, asdict(now), tokens)
        if clock() - started >= timeout:
            return GateResult(False, clock() - started, f"not ready after {timeout:.0f} s: {last}", asdict(now))
        sleep(interval)
