"""The benchmark's arithmetic and its coherence judgement, on scripted streams with a scripted clock."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from module_utils.vllm_bench import (
    BenchError, CoherenceCase, RequestRecord, Summary, coherence_cases, judge, make_prompts, percentile,
    run_load, single_stream_decode, sse_events, stream_completion, summarize, summary_lines,
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


def test_run_load_keeps_concurrency_bound():
    in_flight, peak = 0, 0
    import threading
    lock = threading.Lock()

    class Counting:
        def __init__(self):
            self.completions = streaming_client(self.create)

        def create(self, **_):
            nonlocal in_flight, peak
            with lock:
                in_flight += 1
                peak = max(peak, in_flight)
            import time
            time.sleep(0.02)
            with lock:
                in_flight -= 1
            return StreamedResponse([chunk("x"), chunk(usage=(3, 1)), "data: [DONE]"])

    load = run_load(Counting(), "m", make_prompts(12, 8), 1, concurrency=3)
    assert load.completed == 12 and peak <= 3


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


def test_the_event_stream_is_read_to_its_end_after_done():
    read: list[str] = []

    def lines():
        for line in ['data: {"choices": [{"text": "a"}]}', "", "data: [DONE]", "", "data: {\"late\": 1}"]:
            read.append(line)
            yield line

    assert list(sse_events(lines())) == [{"choices": [{"text": "a"}]}]
    assert len(read) == 5  # nothing left unread, so the connection can be kept
