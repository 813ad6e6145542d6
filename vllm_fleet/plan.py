"""vllm-fleet plan: will the model fit, offline, before anything is downloaded or changed.

  vllm-fleet plan (--gguf FILE... | --config config.json --quant TYPE) --gpus N --gpu-memory-gib G
                  --tp T [--pp P] --max-model-len L [--gpu-memory-utilization U] [--gpu-name NAME]
                  [--bandwidth-gbs B] [--json FILE]

The arithmetic is plugins/module_utils/planner.py (docs/planner.md). Exit codes: 0 go, 6 no-go (each reason
names a fix), 1 the input could not be read, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.dsa_policy import MODES, PolicyError
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.planner import (DEFAULT_GPU_MEMORY_UTILIZATION, EXIT_NO_GO, GIB, QUANT_BLOCKS, Layout, Plan,
                                                                               plan_for)

EXIT_GO = 0
EXIT_BAD_INPUT = 1


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vllm-fleet plan", description=__doc__.split("\n\n", maxsplit=1)[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gguf", nargs="+", metavar="FILE", help="the model's GGUF file(s); one shard names the set")
    source.add_argument("--config", type=Path, help="HF config.json (with --quant)")
    parser.add_argument("--quant", choices=sorted(QUANT_BLOCKS), help="with --config: every matrix in this type")
    parser.add_argument("--gpus", type=int, required=True, help="GPUs on the host")
    parser.add_argument("--gpu-memory-gib", type=float, required=True, help="memory of one GPU in GiB")
    parser.add_argument("--tp", type=int, required=True, help="tensor-parallel size")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size (default 1)")
    parser.add_argument("--max-model-len", type=int, required=True, help="context length to serve")
    parser.add_argument("--gpu-memory-utilization", type=float, default=DEFAULT_GPU_MEMORY_UTILIZATION,
                        help=f"vLLM's share of GPU memory (default {DEFAULT_GPU_MEMORY_UTILIZATION})")
    parser.add_argument("--gpu-name", default="NVIDIA RTX PRO 6000 Blackwell",
                        help="GPU name for the bandwidth table (default: the flagship's)")
    parser.add_argument("--dsa-attention", choices=MODES, default="auto",
                        help="DSA models: dense MLA drops the indexer's weights and key cache; auto decides by the GPU "
                             "as the service does (SM 12.x dense, SM 9.x/10.x sparse)")
    parser.add_argument("--bandwidth-gbs", type=float, help="memory bandwidth of one GPU, GB/s (overrides the table)")
    parser.add_argument("--json", type=Path, help="write the plan here")
    args = parser.parse_args(argv)
    if args.config and not args.quant:
        parser.error("--config needs --quant")
    if args.gguf and args.quant:
        parser.error("--quant is for --config; a GGUF carries its own types")
    return args


def gib(n_bytes: float) -> str:
    return f"{n_bytes / GIB:,.2f} GiB"


def table(plan: Plan) -> Table:
    layout = plan.layout
    view = Table(title=f"plan: {plan.architecture}, {plan.quant}, {layout.gpus} x {layout.gpu_memory_gib:g} GiB, "
                       f"TP {layout.tp} PP {layout.pp}, max_model_len {layout.max_model_len}")
    view.add_column("figure")
    view.add_column("value", justify="right")
    rows = [
        ("parameters", f"{plan.parameters / 1e9:,.1f} B"),
        ("weights, total", gib(plan.weight_bytes)),
        ("weights per GPU (fullest rank)", gib(plan.weight_bytes_per_gpu)),
        *((f"  {part}", gib(n)) for part, n in plan.weight_bytes_per_gpu_by_part.items() if n),
        ("memory budget per GPU", gib(plan.memory_budget_bytes_per_gpu)),
        ("activations + non-torch + CUDA graphs", gib(plan.reserve_bytes_per_gpu)),
        ("KV cache per GPU", gib(plan.kv_cache_bytes_per_gpu)),
        ("KV bytes per token (one rank)", f"{plan.kv_bytes_per_token:,}"),
        ("KV bytes per token, dense formula", f"{plan.kv_bytes_per_token_dense_formula:,}"),
        ("KV cache tokens", f"{plan.kv_cache_tokens:,}"),
        ("largest max_model_len", f"{plan.max_model_len_fit:,}"),
        (f"concurrency at {layout.max_model_len:,}", f"{plan.max_concurrency:g}"),
        ("decode bytes per token", f"{plan.decode_bytes_per_token / 1e9:,.2f} GB"),
        ("roofline tok/s (TP x bandwidth)", _num(plan.roofline.get("ceiling_tok_s"))),
        ("roofline tok/s (replicated tensors per rank)", _num(plan.roofline_tok_s_tp_aware)),
        ("bandwidth", f"{plan.roofline.get('bandwidth_gbs') or '-'} GB/s ({plan.roofline.get('bandwidth_source')})"),
    ]
    for name, value in rows:
        view.add_row(name, value)
    return view


def _num(value: float | None) -> str:
    return f"{value:,.1f}" if value else "-"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    console = Console(stderr=False)
    layout = Layout(gpus=args.gpus, gpu_memory_gib=args.gpu_memory_gib, tp=args.tp, pp=args.pp,
                    max_model_len=args.max_model_len, gpu_memory_utilization=args.gpu_memory_utilization,
                    gpu_name=args.gpu_name, bandwidth_gbs=args.bandwidth_gbs)
    try:
        plan, dsa = plan_for(layout, args.dsa_attention, gguf=args.gguf,
                             config=str(args.config) if args.config else None, quant=args.quant)
    except PolicyError as error:
        console.print(f"plan: {error}")
        return EXIT_BAD_INPUT
    except (OSError, ValueError, KeyError) as error:
        console.print(f"plan: cannot read the model: {error}")
        return EXIT_BAD_INPUT
    console.print(table(plan))
    if dsa:
        console.print(f"note: DSA attention {dsa.mode}: {dsa.reason}")
    for note in plan.notes:
        console.print(f"note: {note}")
    for reason in plan.no_go:
        console.print(f"no-go: {reason}")
    code = EXIT_GO if plan.go else EXIT_NO_GO
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**plan.as_dict(), "dsa_attention": dsa.mode if dsa else None,
                                         "exit_code": code}, indent=1) + "\n")
    console.print(f"plan: {'go' if plan.go else 'no-go'} (exit {code})")
    return code
