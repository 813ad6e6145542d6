"""llama.cpp glm-dsa GGUF tensors -> transformers GlmMoeDsaForCausalLM state dict (float32).

The inverse of llama.cpp's converter layout (see ../shared/glm5-reference/README.md):
attn_k_b [heads, kv_lora, nope] and attn_v_b [heads, v, kv_lora] are fused back into
kv_b_proj [heads * (nope + v), kv_lora]; merged experts are split per expert. Quantized
tensors are dequantized with gguf-py, so the reference sees exactly the weights a loader
must produce from that file.
"""
from __future__ import annotations

import re

import numpy as np
import gguf

BLOCK = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q_a.weight": "self_attn.q_a_proj.weight",
    "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
    "attn_q_b.weight": "self_attn.q_b_proj.weight",
    "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
    "indexer.attn_q_b.weight": "self_attn.indexer.wq_b.weight",
    "indexer.attn_k.weight": "self_attn.indexer.wk.weight",
    "indexer.k_norm.weight": "self_attn.indexer.k_norm.weight",
    "indexer.k_norm.bias": "self_attn.indexer.k_norm.bias",
    "indexer.proj.weight": "self_attn.indexer.weights_proj.weight",
}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
       "output.weight": "lm_head.weight"}
EXPERTS = {"ffn_gate_exps.weight": "gate_proj", "ffn_up_exps.weight": "up_proj", "ffn_down_exps.weight": "down_proj"}


def read_tensors(paths: list[str]) -> dict[str, np.ndarray]:
    out = {}
    for path in paths:
        for t in gguf.GGUFReader(path).tensors:
            out[t.name] = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
    return out


def hf_state(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    sd: dict[str, np.ndarray] = {}
    k_b: dict[int, np.ndarray] = {}
    v_b: dict[int, np.ndarray] = {}
    for name, arr in tensors.items():
        if name in TOP:
            sd[TOP[name]] = arr
            continue
        m = re.fullmatch(r"blk\.(\d+)\.(.+)", name)
        if not m:
            raise ValueError(f"unexpected tensor {name}")
        i, rest = int(m[1]), m[2]
        p = f"model.layers.{i}."
        if rest == "attn_k_b.weight":
            k_b[i] = arr
        elif rest == "attn_v_b.weight":
            v_b[i] = arr
        elif rest in EXPERTS:
            for e in range(arr.shape[0]):
                sd[p + f"mlp.experts.{e}.{EXPERTS[rest]}.weight"] = arr[e]
        elif rest in BLOCK:
            sd[p + BLOCK[rest]] = arr
        else:
            raise ValueError(f"unmapped tensor {name}")
    for i, kb in k_b.items():
        heads, kv_lora, nope = kb.shape
        vb = v_b[i]
        fused = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1)  # [heads, nope + v, kv_lora]
        sd[f"model.layers.{i}.self_attn.kv_b_proj.weight"] = fused.reshape(-1, kv_lora)
    return sd
