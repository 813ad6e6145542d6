#!/usr/bin/env python3
"""Write a GLM-5-architecture GGUF with GLM-5's real per-layer dimensions, few layers, random weights.

For speed measurements on a GPU machine (not for output quality): every layer has the shapes
of zai-org/GLM-5 (transformers' GlmMoeDsaConfig defaults: hidden 6144, 64 heads, q_lora 2048,
kv_lora 512, qk_nope 192, qk_rope 64, v 256, dense intermediate 12288, 256 routed experts of
2048, top-8, 1 shared expert, vocab 154880), but only --dense + --moe layers. llama.cpp's
glm-dsa tensor layout (attn_k_b/attn_v_b, merged experts), no DSA indexer tensors (the patched
plugin then runs dense MLA, as the cuda profile's TRITON_MLA expects).

Quantized blocks are written directly: random quants with a fixed, valid fp16 scale, tiled
from one random pool (fast: the file is written at disk speed, no float tensors exist).
Also writes config.json, a word-level tokenizer covering the whole vocab, and
decode-bytes.json: the bytes one decode step must read (weights of the active experts,
attention, dense layers, lm_head), for the roofline fraction.

usage: make_glm5_shaped.py OUT_DIR [--qtype q8_0|q4_k] [--dense 1] [--moe 2]
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import gguf

ARCH = "glm-dsa"
GLM5 = dict(  # transformers GlmMoeDsaConfig defaults (= zai-org/GLM-5)
    vocab_size=154880, hidden_size=6144, intermediate_size=12288, moe_intermediate_size=2048,
    num_attention_heads=64, num_key_value_heads=64, n_shared_experts=1, n_routed_experts=256,
    routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=2048, qk_rope_head_dim=64,
    qk_nope_head_dim=192, v_head_dim=256, num_experts_per_tok=8, index_topk=2048,
    index_head_dim=128, index_n_heads=32, rms_norm_eps=1e-5, rope_theta=1000000.0,
    max_position_embeddings=202752,
)
Q = gguf.GGMLQuantizationType
# weight std about 0.01: int8 quants uniform in [-127, 127] have std ~73
SCALE = {Q.Q8_0: 1.4e-4, Q.Q4_K: 4.0e-5}


def tensor_plan(d: dict, n_dense: int, n_moe: int) -> list[tuple[str, tuple[int, ...], bool]]:
    """(name, numpy shape, quantized) in llama.cpp's glm-dsa layout."""
    H, I, MI, E = d["hidden_size"], d["intermediate_size"], d["moe_intermediate_size"], d["n_routed_experts"]
    nh, ql, kl = d["num_attention_heads"], d["q_lora_rank"], d["kv_lora_rank"]
    nope, rope, vd, V = d["qk_nope_head_dim"], d["qk_rope_head_dim"], d["v_head_dim"], d["vocab_size"]
    plan = [("token_embd.weight", (V, H), True)]
    for i in range(n_dense + n_moe):
        b = f"blk.{i}."
        plan += [(b + "attn_norm.weight", (H,), False),
                 (b + "attn_q_a.weight", (ql, H), True),
                 (b + "attn_q_a_norm.weight", (ql,), False),
                 (b + "attn_q_b.weight", (nh * (nope + rope), ql), True),
                 (b + "attn_kv_a_mqa.weight", (kl + rope, H), True),
                 (b + "attn_kv_a_norm.weight", (kl,), False),
                 (b + "attn_k_b.weight", (nh, kl, nope), True),
                 (b + "attn_v_b.weight", (nh, vd, kl), True),
                 (b + "attn_output.weight", (H, nh * vd), True),
                 (b + "ffn_norm.weight", (H,), False)]
        if i < n_dense:
            plan += [(b + "ffn_gate.weight", (I, H), True), (b + "ffn_up.weight", (I, H), True),
                     (b + "ffn_down.weight", (H, I), True)]
        else:
            SI = MI * d["n_shared_experts"]
            plan += [(b + "ffn_gate_inp.weight", (E, H), False), (b + "exp_probs_b.bias", (E,), False),
                     (b + "ffn_gate_exps.weight", (E, MI, H), True), (b + "ffn_up_exps.weight", (E, MI, H), True),
                     (b + "ffn_down_exps.weight", (E, H, MI), True),
                     (b + "ffn_gate_shexp.weight", (SI, H), True), (b + "ffn_up_shexp.weight", (SI, H), True),
                     (b + "ffn_down_shexp.weight", (H, SI), True)]
    plan += [("output_norm.weight", (H,), False), ("output.weight", (V, H), True)]
    return plan


def qtype_for(shape: tuple[int, ...], wanted: Q) -> Q:
    """K-quants need rows of a multiple of 256 values; other rows fall back to Q8_0 (as llama.cpp does)."""
    block, _ = gguf.GGML_QUANT_SIZES[wanted]
    return wanted if shape[-1] % block == 0 else Q.Q8_0


def random_pool(qtype: Q, n_blocks: int, rng: np.random.Generator) -> np.ndarray:
    """Random blocks with valid, small fp16 scales (the first 2 bytes of Q8_0 and Q4_K blocks;
    Q4_K's dmin, bytes 2-3, too)."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    pool = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    scale = np.frombuffer(np.float16(SCALE[qtype]).tobytes(), dtype=np.uint8)
    pool[:, 0:2] = scale
    if qtype == Q.Q4_K:
        pool[:, 2:4] = np.frombuffer(np.float16(SCALE[qtype] * 8).tobytes(), dtype=np.uint8)
    return pool


def quantized_bytes(shape: tuple[int, ...], qtype: Q, pool: np.ndarray) -> np.ndarray:
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = int(np.prod(shape)) // block
    data = np.resize(pool, (n_blocks, type_size))
    return data.reshape(*shape[:-1], shape[-1] // block * type_size)


def float_tensor(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if name.endswith("ffn_gate_inp.weight"):
        return (0.01 * rng.standard_normal(shape)).astype(np.float32)
    if name.endswith(".bias"):
        return np.zeros(shape, dtype=np.float32)
    return np.ones(shape, dtype=np.float32)  # norms


def decode_bytes(d: dict, plan: list, sizes: dict[str, int]) -> dict:
    """Bytes a single decode step reads: everything except embeddings rows and the experts
    not routed to (top-k of E per MoE layer)."""
    E, k = d["n_routed_experts"], d["num_experts_per_tok"]
    total = 0
    for name, _, _ in plan:
        if name == "token_embd.weight":
            continue
        n = sizes[name]
        total += n * k // E if "_exps." in name else n
    return {"bytes_per_token": total, "file_bytes": sum(sizes.values()),
            "note": "weights read per decode step: all but token_embd, routed experts at top-k/E"}


def write_config(out: str, d: dict, n_dense: int, n_moe: int) -> None:
    L = n_dense + n_moe
    cfg = {
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": [1],
        "pad_token_id": 1, "first_k_dense_replace": n_dense, "head_dim": d["qk_rope_head_dim"],
        "hidden_act": "silu", "hidden_size": d["hidden_size"], "index_head_dim": d["index_head_dim"],
        "index_n_heads": d["index_n_heads"], "index_topk": d["index_topk"], "indexer_types": ["full"] * L,
        "initializer_range": 0.02, "intermediate_size": d["intermediate_size"],
        "kv_lora_rank": d["kv_lora_rank"],
        "max_position_embeddings": d["max_position_embeddings"], "mlp_bias": False,
        "mlp_layer_types": ["dense"] * n_dense + ["sparse"] * n_moe,
        "moe_intermediate_size": d["moe_intermediate_size"], "n_group": 1,
        "n_routed_experts": d["n_routed_experts"], "n_shared_experts": d["n_shared_experts"],
        "norm_topk_prob": True, "num_attention_heads": d["num_attention_heads"],
        "num_experts_per_tok": d["num_experts_per_tok"], "num_hidden_layers": L,
        "num_key_value_heads": d["num_key_value_heads"], "num_nextn_predict_layers": 0,
        "q_lora_rank": d["q_lora_rank"], "qk_head_dim": d["qk_nope_head_dim"] + d["qk_rope_head_dim"],
        "qk_nope_head_dim": d["qk_nope_head_dim"], "qk_rope_head_dim": d["qk_rope_head_dim"],
        "rms_norm_eps": d["rms_norm_eps"],
        "rope_parameters": {"rope_theta": d["rope_theta"], "rope_type": "default"},
        "routed_scaling_factor": d["routed_scaling_factor"], "tie_word_embeddings": False,
        "topk_group": 1, "use_cache": True, "v_head_dim": d["v_head_dim"], "vocab_size": d["vocab_size"],
        "dtype": "bfloat16",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def write_tokenizer(out: str, vocab_size: int) -> None:
    """Word-level tokenizer with one token per id, so every id the random model emits decodes."""
    vocab = {"<unk>": 0, "<eos>": 1}
    vocab.update({f"w{i}": i for i in range(2, vocab_size)})
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 1, "content": "<eos>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None,
           "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": False},
           "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}}
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<eos>",
                   "unk_token": "<unk>", "pad_token": "<eos>", "model_max_length": 202752}, f)


def write_gguf(path: str, d: dict, plan: list, qtype: Q, n_dense: int, rng: np.random.Generator) -> dict[str, int]:
    w = gguf.GGUFWriter(path, ARCH)
    L = len([p for p in plan if p[0].endswith("attn_norm.weight")])
    w.add_type("model")
    w.add_name(f"glm5-shaped-{L}L")
    w.add_block_count(L)
    w.add_context_length(d["max_position_embeddings"])
    w.add_embedding_length(d["hidden_size"])
    w.add_feed_forward_length(d["intermediate_size"])
    w.add_head_count(d["num_attention_heads"])
    w.add_head_count_kv(1)
    w.add_rope_freq_base(d["rope_theta"])
    w.add_layer_norm_rms_eps(d["rms_norm_eps"])
    w.add_expert_count(d["n_routed_experts"])
    w.add_expert_used_count(d["num_experts_per_tok"])
    w.add_key_length(d["kv_lora_rank"] + d["qk_rope_head_dim"])
    w.add_value_length(d["kv_lora_rank"])
    w.add_leading_dense_block_count(n_dense)
    w.add_vocab_size(d["vocab_size"])
    w.add_q_lora_rank(d["q_lora_rank"])
    w.add_kv_lora_rank(d["kv_lora_rank"])
    w.add_key_length_mla(d["qk_nope_head_dim"] + d["qk_rope_head_dim"])
    w.add_value_length_mla(d["v_head_dim"])
    w.add_expert_feed_forward_length(d["moe_intermediate_size"])
    w.add_expert_shared_count(d["n_shared_experts"])
    w.add_expert_weights_scale(d["routed_scaling_factor"])
    w.add_expert_weights_norm(True)
    w.add_rope_dimension_count(d["qk_rope_head_dim"])
    w.add_nextn_predict_layers(0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    pools = {t: random_pool(t, 1 << 16, rng) for t in {qtype, Q.Q8_0}}
    arrays: list[tuple[str, np.ndarray | tuple]] = []
    sizes: dict[str, int] = {}
    for name, shape, quantized in plan:
        if quantized:
            t = qtype_for(shape, qtype)
            _, ts = gguf.GGML_QUANT_SIZES[t]
            nbytes = int(np.prod(shape)) // gguf.GGML_QUANT_SIZES[t][0] * ts
            byte_shape = (*shape[:-1], shape[-1] // gguf.GGML_QUANT_SIZES[t][0] * ts)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=t)
            arrays.append((name, (shape, t)))
        else:
            arr = float_tensor(name, shape, rng)
            nbytes = arr.nbytes
            w.add_tensor_info(name, shape, arr.dtype, nbytes)
            arrays.append((name, arr))
        sizes[name] = nbytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _name, item in arrays:
        if isinstance(item, tuple):
            shape, t = item
            item = quantized_bytes(shape, t, pools[t])
        w.write_tensor_data(item)
    w.close()
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--qtype", choices=["q8_0", "q4_k"], default="q8_0")
    ap.add_argument("--dense", type=int, default=1)
    ap.add_argument("--moe", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    qtype = {"q8_0": Q.Q8_0, "q4_k": Q.Q4_K}[args.qtype]
    os.makedirs(args.out, exist_ok=True)
    started = time.time()
    plan = tensor_plan(GLM5, args.dense, args.moe)
    path = os.path.join(args.out, f"glm5-shaped-{args.qtype.upper()}.gguf")
    sizes = write_gguf(path, GLM5, plan, qtype, args.dense, np.random.default_rng(args.seed))
    write_config(args.out, GLM5, args.dense, args.moe)
    write_tokenizer(args.out, GLM5["vocab_size"])
    info = decode_bytes(GLM5, plan, sizes) | {"gguf": os.path.basename(path), "qtype": args.qtype,
                                              "dense_layers": args.dense, "moe_layers": args.moe}
    with open(os.path.join(args.out, f"decode-bytes-{args.qtype}.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info | {"seconds": round(time.time() - started, 1)}))


if __name__ == "__main__":
    main()
