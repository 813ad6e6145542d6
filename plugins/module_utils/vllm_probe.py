"""Prove a vLLM server answers: /health, /v1/models lists the model, real completions, tok/s.

/health alone is not proof: a server can answer it and die at its first request, so the probe
always ends with completions and measures output tokens per second from usage.completion_tokens
(a response may carry more tokens than max_tokens asked for).
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Callable


class ProbeError(Exception):
    """The service is not serving as it should; the message says what failed."""


@dataclass
class CompletionSample:
    prompt: str
    text: str
    completion_tokens: int
    seconds: float
    finish_reason: str | None

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ProbeResult:
    base_url: str
    model: str
    served_models: list[str]
    health_wait_seconds: float
    samples: list[CompletionSample] = field(default_factory=list)

    @property
    def completion_tokens(self) -> int:
        return sum(sample.completion_tokens for sample in self.samples)

    @property
    def tokens_per_second(self) -> float:
        seconds = sum(sample.seconds for sample in self.samples)
        return self.completion_tokens / seconds if seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        result = asdict(self)
        for sample_dict, sample in zip(result["samples"], self.samples):
            sample_dict["tokens_per_second"] = round(sample.tokens_per_second, 2)
        result["completion_tokens"] = self.completion_tokens
        result["tokens_per_second"] = round(self.tokens_per_second, 2)
        return result


def server_root(base_url: str) -> str:
    """http://h:p/v1 -> http://h:p (where vLLM serves /health)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def health_status(url: str, api_key: str, timeout: float) -> int | None:
    request = urllib.request.Request(url)
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return None


def wait_for_health(
    base_url: str,
    api_key: str,
    timeout: float,
    interval: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Seconds until /health answered 200; ProbeError once timeout has passed."""
    url = server_root(base_url) + "/health"
    started = clock()
    last: int | None = None
    while True:
        last = health_status(url, api_key, timeout=min(10.0, max(interval, 1.0)))
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


def timed_completion(client: Any, model: str, prompt: str, max_tokens: int) -> CompletionSample:
    started = time.perf_counter()
    response = client.completions.create(model=model, prompt=prompt, max_tokens=max_tokens, temperature=0.0)
    seconds = time.perf_counter() - started
    choice = response.choices[0]
    tokens = response.usage.completion_tokens if response.usage else 0
    return CompletionSample(prompt, choice.text, tokens, seconds, choice.finish_reason)


def check_sample(sample: CompletionSample) -> None:
    if sample.completion_tokens <= 0 or not sample.text:
        raise ProbeError(f"empty completion for prompt {sample.prompt!r} (finish_reason={sample.finish_reason})")


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


def probe_service(
    base_url: str,
    model: str,
    prompts: list[str],
    max_tokens: int,
    api_key: str = "",
    health_timeout: float = 300.0,
    request_timeout: float = 120.0,
    client: Any = None,
) -> ProbeResult:
    """Wait for /health, check /v1/models lists model, send each prompt once."""
    client, models, waited = connect(base_url, model, api_key, health_timeout, request_timeout, client)
    result = ProbeResult(base_url, model, models, round(waited, 2))
    for prompt in prompts:
        sample = timed_completion(client, model, prompt, max_tokens)
        check_sample(sample)
        result.samples.append(sample)
    return result
