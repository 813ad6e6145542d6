#!/usr/bin/env python3
"""transformers reference for a tiny GLM-5 written by make_glm5_tiny.py.

Builds GlmMoeDsaForCausalLM from DIR/config.json + DIR/hf_state.npz (float32, CPU, eager
attention), greedy-decodes N tokens for a few prompts (pure argmax over the full vocab,
no EOS stop, full recompute each step) and writes DIR/reference.json.

Indexer: transformers' GlmMoeDsa always builds the DSA indexer for "full" layers.  When
hf_state.npz has no indexer weights (the GGUF has none), the indexer gets fixed filler
weights (wq_b/wk/weights_proj zero, k_norm weight 1 / bias 0).  That cannot change the
output: the indexer keeps min(index_topk, seq_len) tokens, and index_topk (2048) is far
above every sequence here (<= 40 tokens), so every token is kept and DSA == dense MLA.
The script asserts index_topk >= the longest sequence.

usage: venv/bin/python glm5_hf_reference.py DIR [--tokens 32] [--out DIR/reference.json]
"""
import argparse
import json
import os
import tempfile

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import GlmMoeDsaForCausalLM

PROMPTS = [[5, 6, 7, 8, 9, 10, 11, 12], [100, 200, 300], [42] * 5]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    cfg = json.load(open(os.path.join(args.dir, "config.json")))
    assert cfg["index_topk"] >= max(map(len, PROMPTS)) + args.tokens, "index_topk must cover the sequence"

    sd = {k: torch.from_numpy(v) for k, v in np.load(os.path.join(args.dir, "hf_state.npz")).items()}
    filled = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn.indexer."
        if p + "wk.weight" in sd:
            continue
        ih, idim, H, ql = cfg["index_n_heads"], cfg["index_head_dim"], cfg["hidden_size"], cfg["q_lora_rank"]
        sd[p + "wq_b.weight"] = torch.zeros(ih * idim, ql)
        sd[p + "wk.weight"] = torch.zeros(idim, H)
        sd[p + "k_norm.weight"] = torch.ones(idim)
        sd[p + "k_norm.bias"] = torch.zeros(idim)
        sd[p + "weights_proj.weight"] = torch.zeros(ih, H)
        filled.append(i)

    with tempfile.TemporaryDirectory() as tmp:
        json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"))
        save_file(sd, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        model, info = GlmMoeDsaForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    assert not bad, f"hf_state.npz does not match transformers' model: {bad}"

    res = []
    for p in PROMPTS:
        ids, margins = list(p), []
        for step in range(args.tokens):
            logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1].float()
            top2 = torch.topk(logits, 2)
            margins.append(round(float(top2.values[0] - top2.values[1]), 6))
            ids.append(int(top2.indices[0]))
        gen = ids[len(p):]
        g = model.generate(torch.tensor([p]), max_new_tokens=args.tokens, do_sample=False,
                           eos_token_id=None, pad_token_id=0)[0, len(p):].tolist()
        res.append({"prompt_ids": p, "greedy_ids": gen, "hf_generate_ids": g, "generate_matches_loop": g == gen,
                    "top1_top2_margin_per_step": margins, "min_margin": min(margins)})
        print(p, "->", gen, "generate==loop", g == gen, "min margin %.4g" % min(margins))
    out = args.out or os.path.join(args.dir, "reference.json")
    json.dump({"transformers_version": transformers.__version__, "torch_version": torch.__version__,
               "dtype": "float32", "attn_implementation": "eager",
               "decoding": f"greedy argmax, {args.tokens} new tokens, no EOS stop (compare with temperature=0, ignore_eos)",
               "indexer_filled_layers": filled,
               "indexer_note": "index_topk >= sequence length: DSA keeps every token, so indexer weights do not matter",
               "prompts": res}, open(out, "w"), indent=1)
    print("wrote", out)


if __name__ == "__main__":
    main()
