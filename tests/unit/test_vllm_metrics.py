from __future__ import annotations

import urllib.error

import pytest

from module_utils.vllm_metrics import gauge_sum, in_flight, wait_until_idle

# As vLLM 0.32 (CPU build) prints it, trimmed.
METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="demo"} 2.0
vllm:num_requests_running{engine="1",model_name="demo"} 1.0
vllm:num_requests_running{engine="0",model_name="other"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="demo"} 3.0
vllm:num_requests_running_total_bogus{engine="0"} 9.0
"""


def test_gauges_are_summed_over_engines_of_the_model():
    assert gauge_sum(METRICS, "vllm:num_requests_running", "demo") == 3.0
    assert gauge_sum(METRICS, "vllm:num_requests_running") == 8.0
    assert in_flight(METRICS, "demo").total == 6.0


def test_missing_gauge_is_not_zero():
    assert gauge_sum("up 1\n", "vllm:num_requests_running") is None
    with pytest.raises(ValueError, match="is this a vLLM server"):
        in_flight("up 1\n")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def metrics_with(running: int) -> str:
    return f'vllm:num_requests_running{{model_name="demo"}} {running}\nvllm:num_requests_waiting{{model_name="demo"}} 0\n'


def test_waits_until_the_last_request_finishes():
    clock = FakeClock()
    answers = iter([metrics_with(2), metrics_with(1), metrics_with(0)])
    outcome = wait_until_idle("u", "demo", timeout=10, interval=1, fetch=lambda _: next(answers), clock=clock,
                              sleep=clock.sleep)
    assert outcome.drained and outcome.polls == 3 and outcome.waited_s == 2.0


def test_gives_up_after_the_timeout_with_the_counts():
    clock = FakeClock()
    outcome = wait_until_idle("u", "demo", timeout=3, interval=1, fetch=lambda _: metrics_with(4), clock=clock,
                              sleep=clock.sleep)
    assert not outcome.drained and "4 running and 0 waiting after 3 s" in outcome.reason


def test_a_stopped_server_has_nothing_in_flight():
    def refuse(_: str) -> str:
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    outcome = wait_until_idle("u", "demo", timeout=3, fetch=refuse)
    assert outcome.drained and "not answering" in outcome.reason
