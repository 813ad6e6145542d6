#!/usr/bin/env python3
"""Keep completions flowing through a URL (a load balancer) and count what fails.

Each of `concurrency` threads sends streamed completions one after another until stopped. A
request counts as served when the stream ends with [DONE], finishes for length and the usage block
reports exactly max_tokens output tokens (ignore_eos); anything else (HTTP error, reset connection,
a stream cut short, an aborted request) counts as failed, with its error kept.

  .venv/bin/python -m tests.harness.loadgen --base-url http://127.0.0.1:8010/v1 --model demo --seconds 60
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import urllib.error

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_bench import completion_body
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint, collect_stream


@dataclass
class LoadCounts:
    sent: int = 0
    served: int = 0
    failed: int = 0
    output_tokens: int = 0
    errors: Counter = field(default_factory=Counter)
    first_failure_at: float | None = None

    def as_dict(self) -> dict:
        return {"sent": self.sent, "served": self.served, "failed": self.failed,
                "output_tokens": self.output_tokens, "errors": dict(self.errors.most_common(5))}


def one_request(endpoint: Endpoint, model: str, prompt: str, max_tokens: int) -> tuple[bool, int, str]:
    try:
        with endpoint.open("/v1/completions", completion_body(model, prompt, max_tokens, ignore_eos=True)) as response:
            stream = collect_stream(response)
    except urllib.error.HTTPError as error:
        return False, 0, f"HTTP {error.code}: {error.read()[:200]!r}"
    except (OSError, ValueError) as error:  # refused, reset, timed out, a cut-off JSON line
        return False, 0, f"{type(error).__name__}: {error}"
    usage = [chunk["usage"] for chunk in stream.chunks if chunk.get("usage")]
    tokens = usage[-1].get("completion_tokens", 0) if usage else 0
    reasons = [choice.get("finish_reason") for chunk in stream.chunks for choice in chunk.get("choices") or []]
    finish = next((reason for reason in reversed(reasons) if reason), None)
    if not stream.done:
        return False, tokens, "stream ended early"
    # ignore_eos: a whole answer has exactly max_tokens and stops for length; fewer, or another
    # reason (vLLM aborts requests it cannot finish when it shuts down), is a cut-short answer.
    if finish != "length" or tokens != max_tokens:
        return False, tokens, f"cut short: finish_reason {finish}, {tokens} of {max_tokens} tokens"
    return True, tokens, ""


class LoadGenerator:
    def __init__(self, base_url: str, model: str, concurrency: int = 2, max_tokens: int = 16,
                 api_key: str = "", timeout: float = 120.0, pause: float = 0.0) -> None:
        self.endpoint = Endpoint(base_url, api_key, timeout)
        self.model, self.concurrency, self.max_tokens = model, concurrency, max_tokens
        self.pause = pause  # think time between one client's requests
        self.counts = LoadCounts()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _worker(self, index: int) -> None:
        number = 0
        while not self._stop.is_set():
            number += 1
            ok, tokens, error = one_request(self.endpoint, self.model,
                                            f"Request {index}-{number}: the river flows to the", self.max_tokens)
            with self._lock:
                self.counts.sent += 1
                self.counts.output_tokens += tokens
                if ok:
                    self.counts.served += 1
                else:
                    self.counts.failed += 1
                    self.counts.errors[error[:160]] += 1
                    if self.counts.first_failure_at is None:
                        self.counts.first_failure_at = time.time()
            self._stop.wait(self.pause)

    def start(self) -> "LoadGenerator":
        self._threads = [threading.Thread(target=self._worker, args=(i,), daemon=True) for i in range(self.concurrency)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> LoadCounts:
        """Stop sending; the requests in flight finish and are counted."""
        self._stop.set()
        for thread in self._threads:
            thread.join(self.endpoint.timeout + 5)
        return self.counts

    def __enter__(self) -> "LoadGenerator":
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--pause", type=float, default=0.0, help="think time between one client's requests (s)")
    args = parser.parse_args()
    generator = LoadGenerator(args.base_url, args.model, args.concurrency, args.max_tokens, args.api_key,
                              pause=args.pause).start()
    time.sleep(args.seconds)
    counts = generator.stop()
    print(json.dumps(counts.as_dict()))
    return 0 if counts.failed == 0 and counts.served > 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
