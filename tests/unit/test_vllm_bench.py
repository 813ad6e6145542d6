"""The benchmark's arithmetic and its coherence judgement, on scripted streams with a scripted clock,
and the load generator against a real local HTTP server that streams like vLLM."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from module_utils.vllm_bench import (
    BenchError, CoherenceCase, RequestRecord, Summary, astream_completion, coherence_cases, judge, make_prompts,
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
    class Broken:
        completions = streaming_client(lambda **_: (_ for _ in ()).throw(ConnectionError("refused")))
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


class AsyncStreamedResponse:
    def __init__(self, lines):
        self.lines = lines

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False

    async def iter_lines(self):
        for line in self.lines:
            await asyncio.sleep(0)  # another request's task may run between two lines
            yield line


class ScriptedAsyncClient:
    """The async twin of ScriptedClient (shaped like openai.AsyncOpenAI's streaming-response mode)."""

    def __init__(self, clock: Clock, script: list[tuple[float, str]]) -> None:
        self.clock = clock
        self.script = script
        self.calls: list[dict] = []
        self.completions = streaming_client(self.create)

    def create(self, **kwargs):
        self.calls.append(kwargs)
        clock, script = self.clock, self.script

        class Response(AsyncStreamedResponse):
            async def iter_lines(self):
                for gap, item in script:
                    await asyncio.sleep(0)
                    clock.now += gap
                    yield item
                    yield ""
                yield "data: [DONE]"
        return Response([])


def test_async_stream_times_like_the_sync_one():
    clock = Clock()
    client = ScriptedAsyncClient(clock, [(0.5, chunk("a")), (0.1, chunk("")), (0.3, chunk("cd")),
                                         (0.0, chunk(usage=(7, 5)))])
    record = asyncio.run(astream_completion(client, "m", [1, 2, 3], 4, clock=clock))
    assert record.ok
    assert record.ttft == pytest.approx(0.5)
    # a chunk whose text is empty (an incomplete multi-byte character) is still a step
    assert record.itl == pytest.approx([0.1, 0.3])
    assert record.latency == pytest.approx(0.9)
    assert (record.prompt_tokens, record.completion_tokens) == (7, 5)
    assert client.calls[0]["prompt"] == [1, 2, 3] and client.calls[0]["stream"] is True


def test_async_stream_error_is_recorded_not_raised():
    def refuse(**_):
        raise ConnectionError("refused")
    client = SimpleNamespace(completions=streaming_client(refuse))
    record = asyncio.run(astream_completion(client, "m", "p", 4))
    assert not record.ok and "ConnectionError: refused" in record.error


def test_run_load_keeps_concurrency_bound_and_starts_in_prompt_order():
    in_flight, peak, started = 0, 0, []

    class Counting:
        def __init__(self):
            self.completions = streaming_client(self.create)

        def create(self, prompt, **_):
            class Response(AsyncStreamedResponse):
                async def __aenter__(self):
                    nonlocal in_flight, peak
                    started.append(prompt)
                    in_flight += 1
                    peak = max(peak, in_flight)
                    await asyncio.sleep(0.01)
                    return self

                async def __aexit__(self, *exc):
                    nonlocal in_flight
                    in_flight -= 1
                    return False
            return Response([chunk("x"), chunk(usage=(3, 1)), "data: [DONE]"])

    prompts = make_prompts(12, 8)
    load = run_load(Counting(), "m", prompts, 1, concurrency=3)
    assert load.completed == 12 and load.output_tokens == 12
    assert peak == 3
    assert started == prompts


class VllmLikeHandler(BaseHTTPRequestHandler):
    """POST /v1/completions: streams `tokens` chunks, `first_delay` s before the first, `gap` s apart."""

    protocol_version = "HTTP/1.1"
    first_delay, gap, tokens = 0.05, 0.01, 4
    lock = threading.Lock()
    in_flight = peak = 0
    connections: set = set()
    prompts: list = []

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
        try:
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_run_load_through_the_real_openai_client(vllm_like_server):
    """The sync OpenAI client goes in; its async twin streams from a real HTTP server."""
    from openai import OpenAI

    client = OpenAI(base_url=vllm_like_server, api_key="EMPTY", timeout=30.0, max_retries=0)
    prompts = [[index, 1, 2, 3, 4] for index in range(8)]
    load = run_load(client, "m", prompts, 4, concurrency=4)
    assert load.failed == 0, load.errors
    assert (load.completed, load.output_tokens, load.input_tokens) == (8, 32, 40)
    assert VllmLikeHandler.peak == 4
    # requests ride on at most `concurrency` connections (kept alive and reused)
    assert len(VllmLikeHandler.connections) <= 4
    # the server waits 50 ms before the first chunk and 10 ms between chunks: the client sees it
    assert 40.0 <= load.ttft_ms.mean < 500.0
    assert 8.0 <= load.itl_ms.median < 200.0
    # two waves of four requests, each at least 50 + 3 * 10 ms
    assert load.duration_s >= 0.16
    record = stream_completion(client, "m", "a prompt", 4)
    assert record.ok and record.completion_tokens == 4 and record.ttft >= 0.04


def test_run_load_warmup_goes_first_and_is_not_counted(vllm_like_server):
    from openai import OpenAI

    client = OpenAI(base_url=vllm_like_server, api_key="EMPTY", timeout=30.0, max_retries=0)
    prompts = [[index, 7, 7] for index in range(4)]
    load = run_load(client, "m", prompts, 4, concurrency=2, warmup=[99, 7, 7])
    assert VllmLikeHandler.prompts[0] == [99, 7, 7]
    assert sorted(VllmLikeHandler.prompts[1:]) == prompts
    assert (load.requests, load.completed, load.input_tokens) == (4, 4, 12)
    # the warm-up's connection is kept and reused by the timed requests
    assert len(VllmLikeHandler.connections) <= 2


def test_benchmark_service_against_a_streaming_server(vllm_like_server):
    from openai import OpenAI

    from module_utils.vllm_bench import BenchPlan, benchmark_service

    client = OpenAI(base_url=vllm_like_server, api_key="EMPTY", timeout=30.0, max_retries=0)
    plan = BenchPlan(decode_requests=2, decode_max_tokens=4, concurrency=[1, 3], requests_per_level=3,
                     max_tokens=4, prompt_words=8)
    result = benchmark_service(client, "m", plan, [])
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
