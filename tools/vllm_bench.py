#!/usr/bin/env python3
"""Measure a running vLLM server with the verify role's own benchmark code, outside Ansible.

  tools/vllm_bench.py --base-url http://127.0.0.1:8000/v1 --model demo --concurrency 1 4 8 \
      [--gguf model.gguf --num-gpus 8 [--bandwidth-gbs 1792 | --gpu-name "NVIDIA H200"]] [--json out.json]

Prints the figures (single-stream decode, each concurrency level, roofline) and optionally writes
the whole result as JSON. Needs the openai and aiohttp packages (and gguf for --gguf); a vLLM
venv has them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))  # also run outside the controller venv

from module_utils.roofline import roofline_for  # noqa: E402
from module_utils.vllm_bench import BenchPlan, Endpoint, benchmark_service, coherence_cases, summary_lines  # noqa: E402
from module_utils.vllm_probe import make_client, wait_for_health  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4])
    parser.add_argument("--requests-per-level", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--decode-requests", type=int, default=3)
    parser.add_argument("--decode-max-tokens", type=int, default=256)
    parser.add_argument("--prompt-words", type=int, default=64)
    parser.add_argument("--coherence", type=Path, help="JSON list of coherence cases")
    parser.add_argument("--gguf", help="the served GGUF (first shard), for the roofline")
    parser.add_argument("--num-gpus", type=int, default=1)
    parser.add_argument("--bandwidth-gbs", type=float)
    parser.add_argument("--gpu-name")
    parser.add_argument("--health-timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path, help="write the full result here")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    wait_for_health(args.base_url, args.api_key, args.health_timeout)
    client = make_client(args.base_url, args.api_key, 600.0)
    plan = BenchPlan(decode_requests=args.decode_requests, decode_max_tokens=args.decode_max_tokens,
                     concurrency=args.concurrency, requests_per_level=args.requests_per_level,
                     max_tokens=args.max_tokens, prompt_words=args.prompt_words)
    cases = coherence_cases(json.loads(args.coherence.read_text())) if args.coherence else []
    result = benchmark_service(client, Endpoint(args.base_url, args.api_key, 600.0), args.model, plan, cases)
    if args.gguf:
        roofline = roofline_for(args.gguf, args.num_gpus, args.gpu_name, args.bandwidth_gbs)
        result["roofline"] = roofline.as_dict()
        fraction = roofline.fraction(result["decode"]["tok_s_tpot"])
        result["roofline_fraction"] = round(fraction, 4) if fraction else None
    print("\n".join(summary_lines(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
