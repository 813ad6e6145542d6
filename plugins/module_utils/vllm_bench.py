"""Measure a vLLM server the way the field reports it, and check its output is right.

Figures follow what `vllm bench serve` prints: output token throughput, TTFT, TPOT and ITL at
mean/median/p99, request errors. Requests stream (server-sent events), so TTFT and the gaps
between chunks are seen by the client. Tokens are counted from the server's usage block, never
from max_tokens: a response can carry more tokens than asked for.

A load runs the way `vllm bench serve` drives one, on the HTTP client it uses (aiohttp): every
request a task on one asyncio event loop, at most `concurrency` in flight behind a semaphore and
on as many kept-alive connections, started in prompt order. The client shares the cores of a
server on the same host (the test hosts, a GPU host verifying itself), and what it burns the
server lacks: measured on the test host, the OpenAI client (httpx underneath) took 2-3x the CPU
of aiohttp for the same streams, and the figures came out 6 % (throughput) and 17 % (TTFT) off
`vllm bench serve`'s. Each stream is read to its end (past [DONE]), so its connection goes back to
the pool for the next request; one left unread is closed, and every request would pay a new one.

Every request gets its own prompt (a distinct opening), so the prefix cache cannot make the
figures look better than a real workload.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .vllm_http import DONE, Endpoint, event_data

Clock = Callable[[], float]

# Plain words, so a prompt is about one token per word on any tokenizer.
PROMPT_WORDS = (
    "river mountain engine signal harbor winter copper lantern garden market orbit valley "
    "planet silver thunder meadow canyon circuit voltage compass anchor forest marble ember "
    "glacier beacon quartz prairie falcon harvest island journey kernel ladder magnet nectar "
    "oasis pepper quiver rocket saddle timber umbrella velvet walnut yonder zephyr"
).split()


class BenchError(Exception):
    """A benchmark or coherence check failed; the message says which and with what figures."""


@dataclass
class RequestRecord:
    ok: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    error: str = ""

    @property
    def tpot(self) -> float:
        """Seconds per output token after the first (the decode step, as vLLM defines TPOT)."""
        if self.completion_tokens <= 1:
            return 0.0
        return (self.latency - self.ttft) / (self.completion_tokens - 1)


@dataclass
class Summary:
    mean: float
    median: float
    p99: float

    @classmethod
    def of(cls, values: list[float], scale: float = 1000.0) -> "Summary":
        """Mean, median and p99 of values (seconds) in milliseconds; zeros when there are none."""
        if not values:
            return cls(0.0, 0.0, 0.0)
        scaled = [value * scale for value in values]
        return cls(round(statistics.fmean(scaled), 3), round(statistics.median(scaled), 3),
                   round(percentile(scaled, 99.0), 3))


@dataclass
class LoadResult:
    concurrency: int
    requests: int
    completed: int
    failed: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    ttft_ms: Summary
    tpot_ms: Summary
    itl_ms: Summary
    errors: list[str] = field(default_factory=list)

    @property
    def output_throughput(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def request_throughput(self) -> float:
        return self.completed / self.duration_s if self.duration_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "requests": self.requests,
            "completed": self.completed,
            "failed": self.failed,
            "duration_s": round(self.duration_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "output_throughput": round(self.output_throughput, 2),
            "request_throughput": round(self.request_throughput, 3),
            "ttft_ms": vars(self.ttft_ms),
            "tpot_ms": vars(self.tpot_ms),
            "itl_ms": vars(self.itl_ms),
            "errors": self.errors[:5],
        }


@dataclass
class DecodeResult:
    """Single-stream decode: one request at a time, long output."""

    requests: int
    output_tokens: int
    tok_s_tpot: float
    tok_s_wall: float
    ttft_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {key: round(value, 2) if isinstance(value, float) else value for key, value in vars(self).items()}


def percentile(values: list[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default method), without numpy."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def make_prompts(count: int, words: int, seed: int = 0) -> list[str]:
    """count distinct prompts of about `words` tokens; each opens differently (no shared prefix)."""
    rng = random.Random(seed)
    prompts = []
    for index in range(count):
        body = " ".join(rng.choice(PROMPT_WORDS) for _word in range(max(words - 2, 1)))
        prompts.append(f"Request {index} {seed}: {body}")
    return prompts


def make_token_prompts(count: int, length: int, vocab_size: int, seed: int = 0) -> list[list[int]]:
    """count prompts of exactly `length` random token ids (the workload of vLLM's random dataset)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _token in range(length)] for _prompt in range(count)]


def completion_body(model: str, prompt: str | list[int], max_tokens: int, ignore_eos: bool) -> dict[str, Any]:
    """The streamed, greedy completion request every benchmark request sends (vLLM's JSON body)."""
    return dict(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0.0, stream=True,
                stream_options={"include_usage": True}, ignore_eos=ignore_eos)


class StreamTimer:
    """Times one streamed completion from its event-stream lines, as `vllm bench serve` does.

    Started just before the request is sent; a chunk that carries a choice is a step of the
    generation (its text can be empty while a multi-byte character is incomplete): the first
    one is TTFT, each later one an inter-token gap. Tokens come from the usage chunk.
    """

    __slots__ = ("clock", "record", "started", "last")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.record = RequestRecord(ok=False)
        self.started = clock()
        self.last = self.started

    def line(self, line: str) -> None:
        """Take one line of the stream (blank lines, comments and [DONE] change nothing)."""
        data = event_data(line)
        if data is None or data == DONE:
            return
        chunk = json.loads(data)
        if chunk.get("choices"):
            now = self.clock()
            if self.record.ttft == 0.0:
                self.record.ttft = now - self.started
            else:
                self.record.itl.append(now - self.last)
            self.last = now
        usage = chunk.get("usage")
        if usage:
            self.record.prompt_tokens = usage["prompt_tokens"]
            self.record.completion_tokens = usage["completion_tokens"]

    def failed(self, error: BaseException) -> RequestRecord:
        self.record.error = f"{type(error).__name__}: {error}"
        return self.record

    def done(self) -> RequestRecord:
        record = self.record
        record.latency = self.last - self.started
        record.ok = record.completion_tokens > 0
        if not record.ok:
            record.error = "stream ended without output tokens in usage"
        return record


def stream_completion(
    client: Any, model: str, prompt: str | list[int], max_tokens: int, ignore_eos: bool = True,
    clock: Clock = time.perf_counter,
) -> RequestRecord:
    """One streamed completion through a sync client; times the first chunk and every gap.

    The server-sent events are read as raw lines (the OpenAI client's streaming-response mode):
    building a typed object per chunk costs the client enough CPU to slow a server that shares
    its cores, which the figures would then wrongly show. The stream is read to its end (not left
    at [DONE]), so the connection is kept for the next request.
    """
    timer = StreamTimer(clock)
    body = completion_body(model, prompt, max_tokens, ignore_eos)
    extra_body = {"ignore_eos": body.pop("ignore_eos")}
    try:
        with client.completions.with_streaming_response.create(**body, extra_body=extra_body) as response:
            for line in response.iter_lines():
                timer.line(line)
    except Exception as error:  # the client's errors: HTTP status, connection, timeout
        return timer.failed(error)
    return timer.done()


async def astream_completion(session: Any, endpoint: Endpoint, body: dict[str, Any],
                             clock: Clock = time.perf_counter) -> RequestRecord:
    """One streamed completion through an aiohttp session, on the running event loop."""
    timer = StreamTimer(clock)
    try:
        async with session.post(endpoint.completions_url, json=body, headers=endpoint.headers()) as response:
            if response.status != 200:
                raise BenchError(f"HTTP {response.status} {response.reason}: {(await response.text())[:300]}")
            async for line in response.content:  # one server-sent event line at a time
                timer.line(line.decode("utf-8").rstrip("\r\n"))
    except Exception as error:  # HTTP status, connection, timeout, a malformed event
        return timer.failed(error)
    return timer.done()


def summarize(records: list[RequestRecord], concurrency: int, duration: float) -> LoadResult:
    done = [record for record in records if record.ok]
    return LoadResult(
        concurrency=concurrency,
        requests=len(records),
        completed=len(done),
        failed=len(records) - len(done),
        duration_s=duration,
        input_tokens=sum(record.prompt_tokens for record in done),
        output_tokens=sum(record.completion_tokens for record in done),
        ttft_ms=Summary.of([record.ttft for record in done]),
        tpot_ms=Summary.of([record.tpot for record in done if record.completion_tokens > 1]),
        itl_ms=Summary.of([gap for record in done for gap in record.itl]),
        errors=[record.error for record in records if not record.ok],
    )


async def run_load_async(
    endpoint: Endpoint, model: str, prompts: list[str] | list[list[int]], max_tokens: int, concurrency: int,
    ignore_eos: bool = True, clock: Clock = time.perf_counter, warmup: str | list[int] | None = None,
) -> LoadResult:
    """run_load on the running event loop.

    As `vllm bench serve` (request rate inf, max concurrency N): a warmup prompt is sent once, not
    counted, through the same session (so a connection is open before the clock starts); then the
    clock starts, every prompt becomes a task at once, a semaphore lets N in flight (in prompt
    order), and the clock stops when the last one has ended. Proxies come from the environment,
    as for every other client here (and for `vllm bench serve`).
    """
    import aiohttp  # imported late: only the controller (and the agreement check) drives loads

    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=60)
    async with aiohttp.ClientSession(connector=connector, trust_env=True,
                                     timeout=aiohttp.ClientTimeout(total=endpoint.timeout)) as session:
        def request(prompt: str | list[int]) -> Any:
            return astream_completion(session, endpoint, completion_body(model, prompt, max_tokens, ignore_eos), clock)

        if warmup is not None:
            test = await request(warmup)
            if not test.ok:
                raise BenchError(f"warm-up request failed: {test.error}")
        semaphore = asyncio.Semaphore(concurrency)

        async def limited(prompt: str | list[int]) -> RequestRecord:
            async with semaphore:
                return await request(prompt)

        started = clock()
        records = await asyncio.gather(*(limited(prompt) for prompt in prompts))
        return summarize(list(records), concurrency, clock() - started)


def run_load(
    endpoint: Endpoint, model: str, prompts: list[str] | list[list[int]], max_tokens: int, concurrency: int,
    ignore_eos: bool = True, clock: Clock = time.perf_counter, warmup: str | list[int] | None = None,
) -> LoadResult:
    """Send every prompt, at most `concurrency` in flight, and summarize like `vllm bench serve`.

    warmup: a prompt sent once first, uncounted (see run_load_async).
    """
    return asyncio.run(run_load_async(endpoint, model, prompts, max_tokens, concurrency, ignore_eos, clock, warmup))


def single_stream_decode(load: LoadResult) -> DecodeResult:
    """Decode speed of a concurrency-1 run: from TPOT (decode only) and from wall time (with TTFT)."""
    if load.concurrency != 1:
        raise ValueError("single-stream decode needs a concurrency-1 run")
    tpot_s = load.tpot_ms.mean / 1000.0
    return DecodeResult(
        requests=load.completed,
        output_tokens=load.output_tokens,
        tok_s_tpot=1.0 / tpot_s if tpot_s > 0 else 0.0,
        tok_s_wall=load.output_tokens / load.duration_s if load.duration_s > 0 else 0.0,
        ttft_ms=load.ttft_ms.mean,
    )


def raise_on_failed_requests(load: LoadResult) -> None:
    if load.failed:
        raise BenchError(f"{load.failed} of {load.requests} requests failed at concurrency {load.concurrency}: "
                         f"{'; '.join(load.errors[:3])}")


@dataclass
class CoherenceCase:
    prompt: str
    max_tokens: int = 32
    expect_substring: str | None = None
    expect_text: str | None = None
    expect_token_ids: list[int] | None = None


@dataclass
class CoherenceOutcome:
    prompt: str
    text: str
    token_ids: list[int] | None
    ok: bool
    reason: str = ""


def coherence_cases(raw: Iterable[dict[str, Any]]) -> list[CoherenceCase]:
    cases = []
    for entry in raw:
        case = CoherenceCase(**entry)
        if case.expect_substring is None and case.expect_text is None and case.expect_token_ids is None:
            raise BenchError(f"coherence case for {case.prompt!r} expects nothing: give expect_substring, "
                             "expect_text or expect_token_ids")
        cases.append(case)
    return cases


def judge(case: CoherenceCase, text: str, token_ids: list[int] | None) -> CoherenceOutcome:
    """Compare one greedy completion with what the model profile expects."""
    if case.expect_token_ids is not None:
        if token_ids is None:
            return CoherenceOutcome(case.prompt, text, None, False, "the server returned no token ids")
        expected = list(case.expect_token_ids)
        got = token_ids[: len(expected)]
        if got != expected:
            first = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
            return CoherenceOutcome(case.prompt, text, token_ids, False,
                                    f"token {first} differs: expected {expected[first:first + 8]}, got {got[first:first + 8]}")
    if case.expect_text is not None and not text.startswith(case.expect_text):
        return CoherenceOutcome(case.prompt, text, token_ids, False, f"expected text to start with {case.expect_text!r}")
    if case.expect_substring is not None and case.expect_substring not in text:
        return CoherenceOutcome(case.prompt, text, token_ids, False, f"expected {case.expect_substring!r} in the output")
    return CoherenceOutcome(case.prompt, text, token_ids, True)


def greedy_completion(client: Any, model: str, case: CoherenceCase) -> tuple[str, list[int] | None]:
    response = client.completions.create(
        model=model, prompt=case.prompt, max_tokens=case.max_tokens, temperature=0.0,
        extra_body={"return_token_ids": True},
    )
    choice = response.choices[0]
    token_ids = getattr(choice, "token_ids", None)
    if token_ids is None and getattr(choice, "model_extra", None):
        token_ids = choice.model_extra.get("token_ids")
    return choice.text, list(token_ids) if token_ids is not None else None


def check_coherence(client: Any, model: str, cases: list[CoherenceCase]) -> list[CoherenceOutcome]:
    outcomes = [judge(case, *greedy_completion(client, model, case)) for case in cases]
    failed = [outcome for outcome in outcomes if not outcome.ok]
    if failed:
        details = "; ".join(f"prompt {o.prompt!r}: {o.reason} (output {o.text[:80]!r})" for o in failed)
        raise BenchError(f"incoherent output: {details}")
    return outcomes


@dataclass
class BenchPlan:
    """What to measure; the defaults suit a tiny CPU model and finish in seconds."""

    decode_requests: int = 2
    decode_max_tokens: int = 256
    concurrency: list[int] = field(default_factory=lambda: [4])
    requests_per_level: int = 8
    max_tokens: int = 64
    prompt_words: int = 32
    ignore_eos: bool = True
    seed: int = 0


def benchmark_service(client: Any, endpoint: Endpoint, model: str, plan: BenchPlan,
                      coherence: list[CoherenceCase]) -> dict[str, Any]:
    """Warm up, check coherence (through the OpenAI client), then single-stream decode and each
    concurrency level (loads on `endpoint`, the same server)."""
    warmup = stream_completion(client, model, "Warm-up request: say something.", 16, plan.ignore_eos)
    if not warmup.ok:
        raise BenchError(f"warm-up request failed: {warmup.error}")
    outcomes = check_coherence(client, model, coherence)
    prompts = make_prompts(plan.decode_requests + 1, plan.prompt_words, seed=plan.seed)
    # Each load's warm-up prompt is one more distinct prompt (a repeated one would hit the prefix cache).
    decode_load = run_load(endpoint, model, prompts[1:], plan.decode_max_tokens, 1, plan.ignore_eos, warmup=prompts[0])
    raise_on_failed_requests(decode_load)
    levels = []
    for level, concurrency in enumerate(plan.concurrency, start=1):
        prompts = make_prompts(plan.requests_per_level + 1, plan.prompt_words, seed=plan.seed + 1000 * level)
        load = run_load(endpoint, model, prompts[1:], plan.max_tokens, concurrency, plan.ignore_eos, warmup=prompts[0])
        raise_on_failed_requests(load)
        levels.append(load.as_dict())
    return {
        "coherence": [{"prompt": o.prompt, "text": o.text, "ok": o.ok} for o in outcomes],
        "decode": single_stream_decode(decode_load).as_dict(),
        "decode_load": decode_load.as_dict(),
        "levels": levels,
    }


def server_version(base_url: str, api_key: str, timeout: float = 10.0) -> str | None:
    """vLLM's own version from GET /version (recorded with every run)."""
    answer = Endpoint(base_url, api_key, timeout).request("/version").json()
    return answer.get("version") if isinstance(answer, dict) else None


def summary_lines(result: dict[str, Any]) -> list[str]:
    """One line per measurement, the way an operator reads them in the play output."""
    decode = result["decode"]
    lines = [f"single stream: {decode['tok_s_tpot']} tok/s from TPOT, {decode['tok_s_wall']} tok/s wall, "
             f"TTFT {decode['ttft_ms']} ms, {decode['output_tokens']} tokens in {decode['requests']} requests"]
    for level in result["levels"]:
        lines.append(
            f"concurrency {level['concurrency']}: {level['output_throughput']} output tok/s, "
            f"{level['request_throughput']} req/s, TTFT mean/p50/p99 {level['ttft_ms']['mean']}/"
            f"{level['ttft_ms']['median']}/{level['ttft_ms']['p99']} ms, TPOT {level['tpot_ms']['mean']}/"
            f"{level['tpot_ms']['median']}/{level['tpot_ms']['p99']} ms, ITL {level['itl_ms']['mean']}/"
            f"{level['itl_ms']['median']}/{level['itl_ms']['p99']} ms, {level['failed']} failed of {level['requests']}")
    roofline = result.get("roofline") or {}
    if roofline.get("ceiling_tok_s"):
        lines.append(f"roofline: ceiling {roofline['ceiling_tok_s']} tok/s ({roofline['bytes_per_token']} bytes/token at "
                     f"{roofline['bandwidth_gbs']} GB/s x {roofline['num_gpus']}), measured fraction "
                     f"{result.get('roofline_fraction')}")
    else:
        lines.append(f"roofline: n/a ({roofline.get('bandwidth_source', 'not computed')})")
    ok = sum(1 for case in result["coherence"] if case["ok"])
    lines.append(f"coherence: {ok}/{len(result['coherence'])} cases matched")
    return lines
