from __future__ import annotations

import urllib.error

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_metrics import gauge_sum, in_flight, wait_until_idle

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
vllm:generation_tokens_total{engine="0",model_name="demo"} 120.0
vllm:prompt_tokens_total{engine="0",model_name="demo"} 30.0
"""


def test_gauges_are_summed_over_engines_of_the_model():
    assert gauge_sum(METRICS, "vllm:num_requests_running", "demo") == 3.0
    assert gauge_sum(METRICS, "vllm:num_requests_running") == 8.0
    flight = in_flight(METRICS, "demo")
    assert flight.total == 6.0 and flight.tokens == 150.0


def test_missing_gauge_is_not_zero():
    assert gauge_sum("up 1\n", "vllm:num_requests_running") is None
    assert in_flight("up 1\n") is None


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def metrics_with(running: int, tokens: int = 0) -> str:
    return (f'vllm:num_requests_running{{model_name="demo"}} {running}\nvllm:num_requests_waiting{{model_name="demo"}} 0\n'
            f'vllm:generation_tokens_total{{model_name="demo"}} {tokens}\n')


def wait(answers, timeout: float = 10, stall: float = 10.0):
    clock = FakeClock()
    answers = iter(answers)

    def fetch(_url: str) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return wait_until_idle("u", None, timeout=timeout, interval=1, stall_seconds=stall, fetch=fetch, clock=clock,
                           sleep=clock.sleep)


def test_waits_until_the_last_request_finishes():
    outcome = wait([metrics_with(2, 10), metrics_with(1, 20), metrics_with(0, 30)])
    assert outcome.drained and outcome.polls == 3 and outcome.waited_s == 2.0


def test_gives_up_after_the_timeout_with_the_counts():
    outcome = wait([metrics_with(4, n) for n in range(10)], timeout=3)
    assert not outcome.drained and "4 running and 0 waiting after 3 s" in outcome.reason


def test_stale_gauges_on_an_idle_server_end_the_wait():
    outcome = wait([metrics_with(1, 50)] * 20, timeout=60, stall=5)
    assert outcome.drained and "stale gauges" in outcome.reason and outcome.waited_s == 5.0


def test_a_server_not_listening_has_nothing_in_flight():
    outcome = wait([urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))])
    assert outcome.drained and "not listening" in outcome.reason


def test_a_slow_answer_is_polled_again_and_an_http_error_is_raised():
    outcome = wait([TimeoutError("timed out"), metrics_with(0)])
    assert outcome.drained and outcome.polls == 2
    with pytest.raises(urllib.error.HTTPError):
        wait([urllib.error.HTTPError("u", 500, "Internal Server Error", {}, None)])


def test_no_gauges_relies_on_the_balancer():
    outcome = wait(["up 1\n"])
    assert outcome.drained and "stats disabled" in outcome.reason
