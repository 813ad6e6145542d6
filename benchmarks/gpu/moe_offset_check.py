#!/usr/bin/env python3
"""GLM-5-sized Q8_0 experts through vllm-gguf-plugin's fused-MoE Triton kernel, against torch.

  moe_offset_check.py [--experts 0 200 255] [--rows 4096] [--hidden 6144] [--num-experts 256]

One token per listed expert goes through ggml_moe_a8_triton (the kernel vLLM runs for GGUF MoE
when the plugin's CUDA extension is absent) with W = [experts, rows, hidden/32*34] random Q8_0
blocks, the shape of GLM-5's fused gate+up tensor (4096 x 6144 per expert: 26.7 MB, so experts
from 81 on sit past 2 GiB). The reference is x @ dequant(W[e]).T in float32. Prints one JSON line
per expert (max abs error relative to the reference's max) and exits 1 if any is off; an
int32-wrapped offset reads another expert's rows (wrong numbers) or memory before the tensor
(illegal memory access), so run each site in its own process.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

Q8_0_BYTES, Q8_0_VALUES, GGML_TYPE_Q8_0 = 34, 32, 8


def random_q8_0(experts: int, rows: int, hidden: int, gen: torch.Generator) -> torch.Tensor:
    """uint8 [experts, rows, hidden/32*34]: fp16 scale d, then 32 int8 quants per block."""
    blocks = hidden // Q8_0_VALUES
    w = torch.empty(experts, rows, blocks, Q8_0_BYTES, dtype=torch.uint8, device="cuda")
    for e in range(experts):  # one expert at a time keeps the int8 scratch small
        quants = torch.randint(-127, 127, (rows, blocks, Q8_0_VALUES), generator=gen, device="cuda", dtype=torch.int8)
        scales = (torch.rand(rows, blocks, 1, generator=gen, device="cuda") * 0.01 + 0.001).half()
        w[e, :, :, :2] = scales.view(torch.uint8)
        w[e, :, :, 2:] = quants.view(torch.uint8)
    return w.view(experts, rows, blocks * Q8_0_BYTES)


def dequant(w_e: torch.Tensor, hidden: int) -> torch.Tensor:
    blocks = w_e.view(w_e.shape[0], hidden // Q8_0_VALUES, Q8_0_BYTES)
    d = blocks[..., :2].contiguous().view(torch.float16).float()
    q = blocks[..., 2:].contiguous().view(torch.int8).float()
    return (q * d).reshape(w_e.shape[0], hidden)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experts", type=int, nargs="+", default=[0, 200, 255])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=6144)
    ap.add_argument("--num-experts", type=int, default=256)
    args = ap.parse_args()
    from vllm_gguf_plugin.triton.fused_moe.interface import ggml_moe_a8_triton
    from vllm_gguf_plugin.triton.fused_moe.utils import get_triton_moe_block_m

    gen = torch.Generator(device="cuda").manual_seed(0)
    w = random_q8_0(args.num_experts, args.rows, args.hidden, gen)
    tokens = len(args.experts)
    x = torch.randn(tokens, args.hidden, generator=gen, device="cuda").to(torch.bfloat16)
    block_m = get_triton_moe_block_m(GGML_TYPE_Q8_0)
    sorted_ids = torch.full((tokens * block_m,), -1, dtype=torch.int32, device="cuda")
    sorted_ids[::block_m] = torch.arange(tokens, dtype=torch.int32, device="cuda")  # token t alone in block t
    expert_ids = torch.tensor(args.experts, dtype=torch.int32, device="cuda")
    padded = torch.tensor([tokens * block_m], dtype=torch.int32, device="cuda")
    print(json.dumps({"bytes_per_expert": w.stride(0), "expert_tensor_bytes": w.numel(),
                      "first_expert_past_2GiB": -(-2**31 // w.stride(0))}), flush=True)
    out = ggml_moe_a8_triton(x, w, sorted_ids, expert_ids, padded, GGML_TYPE_Q8_0, args.rows, 1, tokens)
    torch.cuda.synchronize()
    bad = 0
    for t, e in enumerate(args.experts):
        ref = x[t].float() @ dequant(w[e], args.hidden).T
        err = float((out[t].float() - ref).abs().max() / ref.abs().max())
        ok = err < 0.02
        bad += not ok
        print(json.dumps({"expert": e, "offset_bytes": e * w.stride(0), "rel_max_err": round(err, 5), "ok": ok}), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
