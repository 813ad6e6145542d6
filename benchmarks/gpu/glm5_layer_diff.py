#!/usr/bin/env python3
"""Where a served tiny GLM-5 leaves transformers: module outputs of vLLM against transformers'.

  glm5_layer_diff.py --gguf T/tiny.gguf --hf T/hf --gen gen-u-f16.json [--seq 0] --dtype float16 --out diff.json

One forward of one sequence (prompt + the server's generated tokens, as generate wrote them),
through vLLM in-process (LLM, enforce_eager, prefill only: max_tokens=1) with forward hooks on
its modules, and through transformers' GlmMoeDsaForCausalLM on the GGUF's own dequantized
weights, in float32 (the reference) and in --dtype on the GPU (transformers' own rounding at that
precision: the floor). For every module both models have (the decoder layers, their norms,
attention projections, the attention core as o_proj's input, the MLP/MoE, the final norm, the
logits), the vLLM tensor is compared with the float32 one after the best scalar fit (vLLM runs
float16 with the residual stream divided by routed_scaling_factor, its FP16-overflow guard):
relative error, cosine and the fitted scale, next to the same figures of the floor model. The
first module, in forward order, whose vLLM error is far above the floor's is where they part.

This is a diagnostic, not a server: it runs the model class, weights and kernels the role's
units run, without the API server.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _tensor(out):
    """The hooked output as one tensor: the first tensor of a tuple."""
    import torch

    if isinstance(out, (tuple, list)):
        parts = [o for o in out if isinstance(o, torch.Tensor)]
        return parts[0] if parts else None
    return out if isinstance(out, torch.Tensor) else None


def hook_modules(model, names: dict[str, str], store: dict, layer_sum: set[str]):
    """Forward hooks (and o_proj pre-hooks: the attention core's output) on model's modules."""
    import torch

    mods = dict(model.named_modules())
    handles = []
    for key, name in names.items():
        mod = mods.get(name)
        if mod is None:
            continue
        if key.endswith(".attn_core"):
            def pre(m, args, key=key):
                if key not in store:
                    store[key] = args[0].detach().float().reshape(-1, args[0].shape[-1]).cpu().clone()
            handles.append(mod.register_forward_pre_hook(pre))
            continue

        def post(m, args, out, key=key):
            if key in store:
                return
            if key in layer_sum and isinstance(out, (tuple, list)) and len(out) == 2 and out[1] is not None:
                t = out[0] + out[1]
            else:
                t = _tensor(out)
            if isinstance(t, torch.Tensor):
                store[key] = t.detach().float().reshape(-1, t.shape[-1]).cpu().clone()
        handles.append(mod.register_forward_hook(post))
    return handles


def module_names(n_layers: int, side: str) -> dict[str, str]:
    """Comparison key -> module name, for vLLM ('v') or transformers ('t'), in forward order."""
    names = {"embed": "model.embed_tokens"}
    for i in range(n_layers):
        p = f"model.layers.{i}."
        names[f"L{i}.input_norm"] = p + "input_layernorm"
        if side == "v":
            names[f"L{i}.qkv_a"] = p + "self_attn.fused_qkv_a_proj"
        else:
            names[f"L{i}.q_a"] = p + "self_attn.q_a_proj"
            names[f"L{i}.kv_a"] = p + "self_attn.kv_a_proj_with_mqa"
        names[f"L{i}.q_a_norm"] = p + "self_attn.q_a_layernorm"
        names[f"L{i}.q_b"] = p + "self_attn.q_b_proj"
        names[f"L{i}.kv_a_norm"] = p + "self_attn.kv_a_layernorm"
        names[f"L{i}.attn_core"] = p + "self_attn.o_proj"
        names[f"L{i}.attn_out"] = p + "self_attn"
        names[f"L{i}.post_attn_norm"] = p + "post_attention_layernorm"
        names[f"L{i}.mlp.gate"] = p + "mlp.gate"
        names[f"L{i}.mlp.shared"] = p + "mlp.shared_experts"
        names[f"L{i}.mlp"] = p + "mlp"
        names[f"L{i}.out"] = p[:-1]
    names["final_norm"] = "model.norm"
    names["logits"] = "lm_head"
    return names


def compare(a, b) -> dict:
    """a (vLLM or floor) against b (float32 reference), after the best scalar fit of a to b."""
    import torch

    n = min(a.shape[0], b.shape[0])
    a, b = a[:n].double(), b[:n].double()
    if a.shape != b.shape:
        return {"shape": [list(a.shape), list(b.shape)]}
    alpha = float((a * b).sum() / (a * a).sum().clamp_min(1e-30))
    err = (alpha * a - b).norm() / b.norm().clamp_min(1e-30)
    cos = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0)
    row = ((alpha * a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-30))
    return {"rel_err": round(float(err), 6), "cos": round(float(cos), 8), "scale": round(alpha, 5),
            "worst_row_rel_err": round(float(row.max()), 6), "worst_row": int(row.argmax())}


def split_qkv_a(store: dict, n_layers: int, q_lora: int) -> None:
    for i in range(n_layers):
        t = store.pop(f"L{i}.qkv_a", None)
        if t is not None:
            store[f"L{i}.q_a"], store[f"L{i}.kv_a"] = t[:, :q_lora], t[:, q_lora:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--hf", required=True)
    ap.add_argument("--gen", required=True, help="a glm5_agreement.py generate output")
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--attention-backend", default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    import torch

    cfg = json.load(open(os.path.join(args.hf, "config.json")))
    n_layers, q_lora = cfg["num_hidden_layers"], cfg["q_lora_rank"]
    seq = json.load(open(args.gen))["sequences"][args.seq]
    ids = seq["prompt_ids"] + seq["generated_ids"]

    from vllm import LLM, SamplingParams

    kw = {"attention_backend": args.attention_backend} if args.attention_backend else {}
    llm = LLM(model=args.gguf, tokenizer=args.hf, dtype=args.dtype, enforce_eager=True, max_model_len=1024,
              gpu_memory_utilization=0.2, kv_cache_memory_bytes=1 << 30, enable_prefix_caching=False, **kw)
    vstore: dict = {}
    vnames = module_names(n_layers, "v")
    layer_sum = {f"L{i}.out" for i in range(n_layers)}
    handles = llm.apply_model(lambda model: hook_modules(model, vnames, vstore, layer_sum))
    classes = llm.apply_model(lambda model: {k: type(m).__name__ for k, m in model.named_modules()
                                             if k in set(vnames.values())})[0]
    out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, temperature=0.0))
    del handles, out
    split_qkv_a(vstore, n_layers, q_lora)
    # vLLM's lm_head is not called as a module (the logits processor applies its weight), so
    # "logits" is reported missing on the vLLM side; the final norm's output is compared instead

    from glm5_agreement import load_model

    ref = load_model(args.hf, [args.gguf])
    tstore: dict = {}
    tnames = module_names(n_layers, "t")
    with torch.no_grad():
        hook_modules(ref, tnames, tstore, set())
        ref(torch.tensor([ids]))
    with torch.no_grad():
        fmodel = ref.to(device="cuda", dtype=getattr(torch, args.dtype))
        fstore: dict = {}
        for m in fmodel.modules():
            m._forward_hooks.clear()
            m._forward_pre_hooks.clear()
        hook_modules(fmodel, tnames, fstore, set())
        fmodel(torch.tensor([ids], device="cuda"))
        floor = fstore

    rows, first = [], None
    for key in list(tnames):
        if key not in tstore or key not in vstore:
            rows.append({"module": key, "missing": [s for s, st in (("vllm", vstore), ("transformers", tstore))
                                                     if key not in st]})
            continue
        v = compare(vstore[key], tstore[key])
        f = compare(floor[key], tstore[key]) if key in floor else {}
        row = {"module": key, "vllm_class": classes.get(vnames.get(key, ""), None), "vllm": v, "floor": f}
        if first is None and "rel_err" in v and "rel_err" in f and v["rel_err"] > 5 * max(f["rel_err"], 1e-4):
            first = key
        rows.append(row)
    result = {"gguf": os.path.basename(args.gguf), "dtype": args.dtype, "seq": args.seq, "tokens": len(ids),
              "first_module_far_above_floor": first, "modules": rows}
    json.dump(result, open(args.out, "w"), indent=1)
    for row in rows:
        if "vllm" in row:
            print(f"{row['module']:18s} vllm rel {row['vllm'].get('rel_err')!s:>10} scale {row['vllm'].get('scale')!s:>8}"
                  f"  floor rel {row['floor'].get('rel_err')!s:>10}  {row.get('vllm_class')}")
        else:
            print(f"{row['module']:18s} missing {row['missing']}")
    print("first module far above the floor:", first, flush=True)


if __name__ == "__main__":
    main()
