"""The benchmark's arithmetic and its coherence judgement, on scripted streams with a scripted clock,
and the load generator against a real local HTTP server that streams like vLLM."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_bench import (
    BenchError, CoherenceCase, Endpoint, RequestRecord, StreamTimer, Summary, coherence_cases, judge, make_prompts,
    percentile, run_load, single_stream_decode, stream_completion, summarize, summary_lines,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def chunk(text: str = "", usage: tuple[int, int] | None = None) -> str:
    """One server-sent event line as vLLM writes it."""
    return "data: " + json.dumps({
        "choices": [{"index": 0, "text": text}] if text or usage is None else [],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]} if usage else None,
    })


class StreamedResponse:
    def __init__(self, lines):
        self.lines = lines

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def iter_lines(self):
        yield from self.lines


def streaming_client(create) -> SimpleNamespace:
    """Shaped like the OpenAI client's completions.with_streaming_response."""
    return SimpleNamespace(with_streaming_response=SimpleNamespace(create=create))


class ScriptedClient:
    """Streams the given chunks, advancing the clock by the given gaps before each."""

    def __init__(self, clock: Clock, script: list[tuple[float, SimpleNamespace]]) -> None:
        self.clock = clock
        self.script = script
        self.calls: list[dict] = []
        self.completions = streaming_client(self.create)

    def create(self, **kwargs):
        self.calls.append(kwargs)

        def stream():
            for gap, item in self.script:
                self.clock.now += gap
                yield item
                yield ""  # the blank line that ends each event
            yield "data: [DONE]"
        return StreamedResponse(stream())


def test_stream_times_first_token_and_gaps_and_counts_tokens_from_usage():
    clock = Clock()
    client = ScriptedClient(clock, [(0.5, chunk("a")), (0.1, chunk("b")), (0.3, chunk("cd")), (0.0, chunk(usage=(7, 5)))])
    record = stream_completion(client, "m", "p", 4, clock=clock)
    assert record.ok
    assert record.ttft == pytest.approx(0.5)
    assert record.itl == pytest.approx([0.1, 0.3])
    assert record.latency == pytest.approx(0.9)
    # usage says 5 tokens although max_tokens was 4 and 3 chunks came: usage wins
    assert record.completion_tokens == 5 and record.prompt_tokens == 7
    assert record.tpot == pytest.approx((0.9 - 0.5) / 4)
    assert client.calls[0]["stream_options"] == {"include_usage": True}
    assert client.calls[0]["extra_body"] == {"ignore_eos": True}


def test_stream_without_usage_is_a_failed_request():
    clock = Clock()
    record = stream_completion(ScriptedClient(clock, [(0.1, chunk("a"))]), "m", "p", 4, clock=clock)
    assert not record.ok and "usage" in record.error


def test_stream_error_is_recorded_not_raised():
    def refuse(**_request):
        raise ConnectionError("refused")

    class Broken:
        completions = streaming_client(refuse)
    record = stream_completion(Broken(), "m", "p", 4)
    assert not record.ok and "ConnectionError: refused" in record.error


def test_percentile_matches_linear_interpolation():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile(list(map(float, range(1, 101))), 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0


def test_summarize_counts_failures_and_throughput():
    good = RequestRecord(ok=True, prompt_tokens=10, completion_tokens=11, ttft=0.2, latency=1.2, itl=[0.1] * 10)
    bad = RequestRecord(ok=False, error="HTTP 500")
    load = summarize([good, good, bad], concurrency=2, duration=2.0)
    assert (load.completed, load.failed, load.output_tokens) == (2, 1, 22)
    assert load.output_throughput == 11.0
    assert load.ttft_ms == Summary(200.0, 200.0, 200.0)
    assert load.tpot_ms.mean == pytest.approx(100.0)
    assert load.as_dict()["errors"] == ["HTTP 500"]


def test_single_stream_decode_from_tpot_and_wall():
    record = RequestRecord(ok=True, completion_tokens=101, ttft=0.5, latency=1.5)
    decode = single_stream_decode(summarize([record], concurrency=1, duration=1.5))
    assert decode.tok_s_tpot == pytest.approx(100.0)
    assert decode.tok_s_wall == pytest.approx(101 / 1.5)
    with pytest.raises(ValueError):
        single_stream_decode(summarize([record], concurrency=4, duration=1.5))


def test_stream_timer_counts_every_chunk_with_a_choice_as_a_step():
    clock = Clock()
    timer = StreamTimer(clock)
    for gap, line in [(0.5, chunk("a")), (0.0, ""), (0.1, chunk("")), (0.3, chunk("cd")), (0.0, ": comment"),
                      (0.0, chunk(usage=(7, 5))), (0.2, "data: [DONE]")]:
        clock.now += gap
        timer.line(line)
    record = timer.done()
    assert record.ok
    assert record.ttft == pytest.approx(0.5)
    # a chunk whose text is empty (an incomplete multi-byte character) is still a step
    assert record.itl == pytest.approx([0.1, 0.3])
    # the latency ends at the last step, not at [DONE]
    assert record.latency == pytest.approx(0.9)
    assert (record.prompt_tokens, record.completion_tokens) == (7, 5)


def test_run_load_against_a_closed_port_records_every_request_as_failed():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    load = run_load(Endpoint(f"http://127.0.0.1:{port}/v1", timeout=5.0), "m", ["a", "b", "c"], 4, concurrency=2)
    assert (load.requests, load.completed, load.failed) == (3, 0, 3)
    assert all("ClientConnectorError" in error for error in load.errors), load.errors


class VllmLikeHandler(BaseHTTPRequestHandler):
    """POST /v1/completions: streams `tokens` chunks, `first_delay` s before the first, `gap` s apart."""

    protocol_version = "HTTP/1.1"
    first_delay, gap, tokens = 0.05, 0.01, 4
    lock = threading.Lock()
    in_flight = peak = 0
    connections: set = set()
    prompts: list = []
    authorizations: list = []

    def log_message(self, *args):
        pass

    def send_event(self, payload: dict | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        body = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(body):x}\r\n".encode() + body + b"\r\n")
        self.wfile.flush()

    def do_POST(self):
        cls = type(self)
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with cls.lock:
            cls.in_flight += 1
            cls.peak = max(cls.peak, cls.in_flight)
            cls.connections.add(self.client_address)
            cls.prompts.append(request["prompt"])
            cls.authorizations.append(self.headers.get("Authorization"))
        try:
            if request["prompt"] == "bad":
                body = b'{"error": {"message": "bad prompt"}}'
                self.send_response(400, "Bad Request")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            assert request["stream"] and request["stream_options"] == {"include_usage": True}
            assert request["ignore_eos"] is True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            time.sleep(cls.first_delay)
            for index in range(cls.tokens):
                if index:
                    time.sleep(cls.gap)
                self.send_event({"choices": [{"index": 0, "text": f" t{index}"}], "usage": None})
            self.send_event({"choices": [], "usage": {"prompt_tokens": len(request["prompt"]),
                                                      "completion_tokens": cls.tokens}})
            self.send_event("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
        finally:
            with cls.lock:
                cls.in_flight -= 1


@pytest.fixture
def vllm_like_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), VllmLikeHandler)
    VllmLikeHandler.in_flight = VllmLikeHandler.peak = 0
    VllmLikeHandler.connections = set()
    VllmLikeHandler.prompts = []
    VllmLikeHandler.authorizations = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_run_load_streams_from_a_real_http_server(vllm_like_server):
    prompts = [[index, 1, 2, 3, 4] for index in range(8)]
    load = run_load(Endpoint(vllm_like_server, "sk-test", 30.0), "m", prompts, 4, concurrency=4)
    assert load.failed == 0, load.errors
    assert (load.completed, load.output_tokens, load.input_tokens) == (8, 32, 40)
    assert VllmLikeHandler.peak == 4
    assert sorted(VllmLikeHandler.prompts) == prompts
    assert VllmLikeHandler.authorizations == ["Bearer sk-test"] * 8
    # requests ride on at most `concurrency` connections (kept alive and reused)
    assert len(VllmLikeHandler.connections) <= 4
    # the server waits 50 ms before the first chunk and 10 ms between chunks: the client sees it
    assert 40.0 <= load.ttft_ms.mean < 500.0
    assert 8.0 <= load.itl_ms.median < 200.0
    # two waves of four requests, each at least 50 + 3 * 10 ms
    assert load.duration_s >= 0.16


def test_run_load_keeps_the_concurrency_bound_and_sends_no_key_when_there_is_none(vllm_like_server):
    prompts = make_prompts(9, 4)
    load = run_load(Endpoint(vllm_like_server), "m", prompts, 4, concurrency=3)
    assert load.completed == 9
    assert VllmLikeHandler.peak == 3
    # started in prompt order: the first three requests are the first three prompts
    assert sorted(VllmLikeHandler.prompts[:3]) == sorted(prompts[:3])
    assert VllmLikeHandler.authorizations == [None] * 9


def test_run_load_records_an_http_error_with_its_status(vllm_like_server):
    load = run_load(Endpoint(vllm_like_server), "m", ["good", "bad"], 4, concurrency=2)
    assert (load.completed, load.failed) == (1, 1)
    assert "HTTP 400 Bad Request" in load.errors[0] and "bad prompt" in load.errors[0]


def test_sync_stream_through_the_openai_client(vllm_like_server):
    from openai import OpenAI

    client = OpenAI(base_url=vllm_like_server, api_key="EMPTY", timeout=30.0, max_retries=0)
    record = stream_completion(client, "m", "a prompt", 4)
    assert record.ok and record.completion_tokens == 4 and record.ttft >= 0.04


def test_run_load_warmup_goes_first_and_is_not_counted(vllm_like_server):
    prompts = [[index, 7, 7] for index in range(4)]
    load = run_load(Endpoint(vllm_like_server), "m", prompts, 4, concurrency=2, warmup=[99, 7, 7])
    assert VllmLikeHandler.prompts[0] == [99, 7, 7]
    assert sorted(VllmLikeHandler.prompts[1:]) == prompts
    assert (load.requests, load.completed, load.input_tokens) == (4, 4, 12)
    # the warm-up's connection is kept and reused by the timed requests
    assert len(VllmLikeHandler.connections) <= 2


def test_a_failed_warmup_stops_the_load(vllm_like_server):
    with pytest.raises(BenchError, match="warm-up request failed: .*HTTP 400"):
        run_load(Endpoint(vllm_like_server), "m", ["a"], 4, concurrency=1, warmup="bad")
    assert VllmLikeHandler.prompts == ["bad"]


def test_benchmark_service_against_a_streaming_server(vllm_like_server):
    from openai import OpenAI

    from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_bench import BenchPlan, benchmark_service

    client = OpenAI(base_url=vllm_like_server, api_key="EMPTY", timeout=30.0, max_retries=0)
    plan = BenchPlan(decode_requests=2, decode_max_tokens=4, concurrency=[1, 3], requests_per_level=3,
                     max_tokens=4, prompt_words=8)
    result = benchmark_service(client, Endpoint(vllm_like_server), "m", plan, [])
    assert result["decode"]["requests"] == 2 and result["decode"]["output_tokens"] == 8
    assert [level["completed"] for level in result["levels"]] == [3, 3]
    # one warm-up, then per load one warm-up and its requests: every prompt distinct (no prefix cache help)
    assert len(VllmLikeHandler.prompts) == 1 + (1 + 2) + 2 * (1 + 3)
    assert len(set(VllmLikeHandler.prompts)) == len(VllmLikeHandler.prompts)
    assert result["levels"][1]["ttft_ms"]["mean"] >= 40.0


def test_prompts_are_distinct_from_their_first_words():
    prompts = make_prompts(50, 16, seed=3)
    assert len({p.split(":")[0] for p in prompts}) == 50
    assert make_prompts(5, 16, seed=3) == prompts[:5]
    assert all(10 < len(p.split()) < 22 for p in prompts)


def test_judge_token_ids_names_the_first_difference():
    case = CoherenceCase(prompt="p", expect_token_ids=[1, 2, 3, 4])
    assert judge(case, "t", [1, 2, 3, 4, 9]).ok
    outcome = judge(case, "t", [1, 2, 7, 4])
    assert not outcome.ok and "token 2 differs" in outcome.reason
    assert not judge(case, "t", None).ok


def test_judge_text_and_substring():
    assert judge(CoherenceCase(prompt="p", expect_substring="Paris"), " Paris.", None).ok
    assert not judge(CoherenceCase(prompt="p", expect_substring="Paris"), " Lyon.", None).ok
    assert not judge(CoherenceCase(prompt="p", expect_text=" Par"), "Paris", None).ok


def test_a_case_that_expects_nothing_is_refused():
    with pytest.raises(BenchError, match="expects nothing"):
        coherence_cases([{"prompt": "p"}])


def test_summary_lines_say_n_a_without_a_ceiling():
    record = RequestRecord(ok=True, completion_tokens=3, ttft=0.1, latency=0.3)
    load = summarize([record], 1, 0.3)
    result = {"decode": single_stream_decode(load).as_dict(), "levels": [load.as_dict()], "coherence": [],
              "roofline": {"bandwidth_source": "no GPU and no bandwidth given"}}
    lines = summary_lines(result)
    assert lines[0].startswith("single stream: 10.0 tok/s from TPOT")
    assert "roofline: n/a (no GPU" in lines[2]
