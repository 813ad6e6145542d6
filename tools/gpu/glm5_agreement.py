#!/usr/bin/env python3
"""Top-1 agreement of a served tiny GLM-5 GGUF with transformers' GlmMoeDsaForCausalLM.

  glm5_agreement.py generate --base-url URL --model NAME --ref REF_DIR --tokens 100 --out gen.json
  glm5_agreement.py compare gen.json --ref REF_DIR --weights A.gguf [B.gguf ...] --label L --out cmp.json
  glm5_agreement.py same gen-a.json gen-b.json --label L --out same.json

generate: greedy (temperature 0, ignore_eos) from the reference prompts through the OpenAI API,
generated ids read back as token ids. compare: transformers (float32, CPU, eager) reads the
whole generated sequence once (teacher forcing) and its argmax at each generated position is
compared with the token the server produced there: the share that agree is the top-1 agreement.
The weights are the GGUF's own, dequantized (glm5_gguf_to_hf.py), or the F32 reference shards.
Every sequence stays below index_topk, where DSA selects every token (== dense MLA), so missing
indexer weights get neutral fillers, as tools/glm5_hf_reference.py does.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.load(resp)


def generate(args: argparse.Namespace) -> None:
    ref = json.load(open(os.path.join(args.ref, "reference.json")))
    out = {"model": args.model, "base_url": args.base_url, "sequences": []}
    for case in ref["prompts"]:
        body = {"model": args.model, "prompt": case["prompt_ids"], "max_tokens": args.tokens,
                "temperature": 0.0, "ignore_eos": True, "logprobs": 1, "return_tokens_as_token_ids": True}
        choice = post(args.base_url.rstrip("/") + "/completions", body)["choices"][0]
        ids = [int(tok.split(":", 1)[1]) for tok in choice["logprobs"]["tokens"]]
        ref_ids = case["greedy_ids"]
        same_prefix = next((i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b), min(len(ids), len(ref_ids)))
        out["sequences"].append({"prompt_ids": case["prompt_ids"], "generated_ids": ids,
                                 "reference_greedy_prefix_match": same_prefix, "reference_len": len(ref_ids)})
    json.dump(out, open(args.out, "w"), indent=1)
    print(json.dumps({"model": args.model, "generated": sum(len(s["generated_ids"]) for s in out["sequences"]),
                      "prefix_match_vs_reference_json": [s["reference_greedy_prefix_match"] for s in out["sequences"]]}))


def load_model(hf_dir: str, weights: list[str]):
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import GlmMoeDsaForCausalLM

    from glm5_gguf_to_hf import hf_state, read_tensors

    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hf_state(read_tensors(weights)).items()}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn.indexer."
        if p + "wk.weight" not in sd:
            ih, idim, hidden, ql = cfg["index_n_heads"], cfg["index_head_dim"], cfg["hidden_size"], cfg["q_lora_rank"]
            sd[p + "wq_b.weight"] = torch.zeros(ih * idim, ql)
            sd[p + "wk.weight"] = torch.zeros(idim, hidden)
            sd[p + "k_norm.weight"] = torch.ones(idim)
            sd[p + "k_norm.bias"] = torch.zeros(idim)
            sd[p + "weights_proj.weight"] = torch.zeros(ih, hidden)
    with tempfile.TemporaryDirectory() as tmp:
        json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"))
        save_file(sd, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        model, info = GlmMoeDsaForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    missing = [k for k in info["missing_keys"] if "rotary" not in k]
    if missing or info["unexpected_keys"]:
        raise SystemExit(f"reference model: missing {missing}, unexpected {info['unexpected_keys']}")
    return model.eval()


# A reduced-precision server can only be held to transformers' top-1 where that choice is clear:
# bfloat16 keeps 8 significant bits (relative spacing 2^-7), so a top-1/top-2 logit margin below a few
# such steps of the logit's own size can flip through rounding alone.
RELATIVE_MARGINS = (2 ** -7, 2 ** -5, 2 ** -3)


def by_margin(margins: list[tuple[float, float, bool]]) -> list[dict]:
    """Agreement restricted to positions whose transformers top-1/top-2 margin exceeds
    rel * |top-1 logit|, for each rel in RELATIVE_MARGINS."""
    out = []
    for rel in RELATIVE_MARGINS:
        kept = [same for margin, top, same in margins if margin > rel * max(top, 1e-6)]
        out.append({"relative_margin": rel, "positions": len(kept), "agree": sum(kept),
                    "top1_agreement": round(sum(kept) / len(kept), 4) if kept else None})
    return out


def compare(args: argparse.Namespace) -> None:
    import torch

    torch.set_grad_enabled(False)
    gen = json.load(open(args.generated))
    model = load_model(os.path.join(args.ref, "hf"), args.weights)
    agree = total = 0
    per_seq = []
    margins: list[tuple[float, float, bool]] = []
    for seq in gen["sequences"]:
        prompt, ids = seq["prompt_ids"], seq["generated_ids"]
        full = torch.tensor([prompt + ids])
        logits = model(full).logits[0]
        steps = logits[len(prompt) - 1: len(prompt) - 1 + len(ids)]
        predicted = steps.argmax(-1).tolist()
        top2 = steps.topk(2, dim=-1).values
        for (l1, l2), a, b in zip(top2.tolist(), predicted, ids):
            margins.append((l1 - l2, abs(l1), a == b))
        same = sum(int(a == b) for a, b in zip(predicted, ids))
        per_seq.append({"positions": len(ids), "agree": same})
        agree += same
        total += len(ids)
    result = {"label": args.label, "server_model": gen["model"], "weights": [os.path.basename(w) for w in args.weights],
              "positions": total, "agree": agree, "top1_agreement": round(agree / total, 4), "per_sequence": per_seq,
              "by_margin": by_margin(margins)}
    json.dump(result, open(args.out, "w"), indent=1)
    print(json.dumps(result))


def same(args: argparse.Namespace) -> None:
    """Greedy tokens of two servers on the same prompts: equal positions and the first divergence."""
    a, b = (json.load(open(path)) for path in (args.a, args.b))
    rows, equal, total = [], 0, 0
    for sa, sb in zip(a["sequences"], b["sequences"]):
        x, y = sa["generated_ids"], sb["generated_ids"]
        first = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
        eq = sum(int(p == q) for p, q in zip(x, y))
        rows.append({"positions": min(len(x), len(y)), "equal": eq, "first_divergence": first})
        equal += eq
        total += min(len(x), len(y))
    result = {"label": args.label, "a": a["model"] + " " + a["base_url"], "b": b["model"] + " " + b["base_url"],
              "positions": total, "equal": equal, "identical": equal == total, "per_sequence": rows}
    json.dump(result, open(args.out, "w"), indent=1)
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--base-url", required=True)
    g.add_argument("--model", required=True)
    g.add_argument("--ref", required=True)
    g.add_argument("--tokens", type=int, default=100)
    g.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("generated")
    c.add_argument("--ref", required=True)
    c.add_argument("--weights", nargs="+", required=True)
    c.add_argument("--label", required=True)
    c.add_argument("--out", required=True)
    d = sub.add_parser("same")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--label", required=True)
    d.add_argument("--out", required=True)
    args = ap.parse_args()
    {"generate": generate, "compare": compare, "same": same}[args.cmd](args)


if __name__ == "__main__":
    main()
