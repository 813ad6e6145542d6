#!/usr/bin/env python3
"""Write a tiny random-weight GLM-5 (HF model_type glm_moe_dsa, GGUF arch glm-dsa).

Output (into --out DIR):
  tiny-glm5-<TYPE>-0000N-of-00003.gguf  llama.cpp tensor layout for arch ``glm-dsa``:
      kv_b_proj split per head into attn_k_b / attn_v_b (no attn_kv_b), experts merged
      into ffn_*_exps, router ffn_gate_inp + exp_probs_b.bias, post-attention norm as
      ffn_norm.  Shard 1 holds all model metadata, shards 2 and 3 only split.* keys.
      Deliberate differences from llama.cpp's own output:
        * output.weight is the LAST tensor of the LAST shard (llama.cpp puts it first in
          shard 1), so a loader that decides "tied embeddings" per shard gets it wrong;
        * no DSA indexer tensors (like GGUFs made before llama.cpp supported the
          indexer) unless --with-indexer is given.
  config.json               GlmMoeDsaForCausalLM config matching the GGUF
  tokenizer.json, tokenizer_config.json, generation_config.json, chat_template.jinja
  hf_state.npz              the same weights under HF checkpoint names (float32,
                            per-expert names, fused kv_b_proj) for a torch-side reference

Dependencies: numpy, gguf (0.19.0); tokenizers only to self-check the built-in tokenizer.
The output is byte-identical for the same arguments.

Tokenizer: by default a small byte-level BPE (256 byte symbols + 256 merges learnt here,
deterministically, from a text embedded in this file) with GLM-4/GLM-5's pre-tokenizer
regex and the GLM special tokens at ids 512-521 (same ids as the glm5-reference folder).
With --tokenizer-dir the tokenizer files are copied from that folder instead.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import zipfile
from collections import Counter

import numpy as np
import gguf

ARCH = "glm-dsa"
NAME = "tiny-glm5"

# ---------------------------------------------------------------- model dims
DIMS = dict(
    hidden_size=256, num_hidden_layers=3, first_k_dense_replace=1,
    intermediate_size=512, moe_intermediate_size=128,
    n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, routed_scaling_factor=2.5,
    num_attention_heads=4, num_key_value_heads=4,
    q_lora_rank=128, kv_lora_rank=512, qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64,
    index_topk=2048, index_head_dim=64, index_n_heads=4,
    max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
)
N_SHARDS = 3
INIT_STD = 0.1          # initializer std (0.02 gives near-tied greedy logits)

SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
            "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]
GLM4_PRETOKENIZE_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                       r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("[gMASK]<sop>{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
                 "{% endfor %}<|assistant|>\n")
CORPUS = """\
The quick brown fox jumps over the lazy dog. A model that is loaded with the wrong
tensor layout still produces tokens, only the wrong ones; a test compares them.
def load_weights(self, weights):
    for name, tensor in weights:
        if name.endswith(".weight"):
            params[name].copy_(tensor)
    return set(params)
class Attention:
    def forward(self, hidden_states, positions):
        query = self.q_proj(hidden_states)
        return self.o_proj(self.attn(query, key, value))
Mixture of experts: the router picks the top two experts for every token, and the
shared expert sees every token. The latent attention keeps one compressed vector
per token in the cache and expands it per head when it is needed.
import numpy as np
x = np.zeros((4, 512), dtype=np.float32)
print("hello world", 1234, 5678, x.shape)
"""


def bytes_to_unicode() -> dict[int, str]:
    """The byte-level BPE alphabet (printable stand-ins for the 256 byte values)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def learn_merges(text: str, n_merges: int) -> list[tuple[str, str]]:
    """Plain greedy BPE on pre-split words; ties broken by the pair itself (deterministic)."""
    b2u = bytes_to_unicode()
    words = Counter(re.findall(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+", text))
    seqs = {w: [b2u[b] for b in w.encode("utf-8")] for w in words}
    merges: list[tuple[str, str]] = []
    while len(merges) < n_merges:
        pairs: Counter = Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        merges.append(best)
        for w in words:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == best:
                    out.append(s[i] + s[i + 1]); i += 2
                else:
                    out.append(s[i]); i += 1
            seqs[w] = out
    return merges


def build_tokenizer(out: str) -> None:
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: i for i, b in enumerate(sorted(b2u, key=lambda b: b2u[b]))}
    merges = []
    for a, b in learn_merges(CORPUS * 4, 512):
        if len(vocab) >= 512:
            break
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append([a, b])
    assert len(vocab) == 512, len(vocab)
    added = [{"id": 512 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": GLM4_PRETOKENIZE_RE}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
    tcfg = {"backend": "tokenizers", "tokenizer_class": "PreTrainedTokenizerFast",
            "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
            "extra_special_tokens": SPECIALS[1:], "model_max_length": 4096}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2)
    with open(os.path.join(out, "chat_template.jinja"), "w") as f:
        f.write(CHAT_TEMPLATE)
    try:  # self-check when the tokenizers package is there
        import tokenizers
        t = tokenizers.Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        ids = t.encode("def load_weights(self):").ids
        assert t.decode(ids) == "def load_weights(self):", t.decode(ids)
        assert t.token_to_id("[gMASK]") == 514
    except ImportError:
        pass


def tokenizer_metadata(tok_dir: str) -> dict:
    """GGUF tokenizer.ggml.* values from an HF tokenizer.json (llama.cpp's gpt2/glm4 style)."""
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    id2tok = {i: t for t, i in tok["model"]["vocab"].items()}
    special = set()
    for a in tok["added_tokens"]:
        id2tok[a["id"]] = a["content"]
        if a.get("special"):
            special.add(a["id"])
    n = max(id2tok) + 1
    tokens = [id2tok.get(i, f"[PAD{i}]") for i in range(n)]
    types = [3 if i in special else (1 if i in id2tok else 5) for i in range(n)]  # 3 control, 5 unused
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    ids = {t: i for i, t in id2tok.items()}
    return dict(tokens=tokens, types=types, merges=merges, eos=ids["<|endoftext|>"],
                bos=ids["[gMASK]"], eot=ids["<|user|>"], eom=ids["<|observation|>"], pad=ids["<|endoftext|>"])


# ---------------------------------------------------------------- weights
def make_hf_state(seed: int, with_indexer: bool) -> dict[str, np.ndarray]:
    """Random float32 weights under HF checkpoint names, in a fixed order."""
    d = DIMS
    rng = np.random.default_rng(seed)
    H, L, I, MI, E = d["hidden_size"], d["num_hidden_layers"], d["intermediate_size"], d["moe_intermediate_size"], d["n_routed_experts"]
    nh, ql, kl = d["num_attention_heads"], d["q_lora_rank"], d["kv_lora_rank"]
    nope, rope, vd = d["qk_nope_head_dim"], d["qk_rope_head_dim"], d["v_head_dim"]
    V = 522

    def lin(*shape):
        return (INIT_STD * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    sd: dict[str, np.ndarray] = {"model.embed_tokens.weight": lin(V, H)}
    for i in range(L):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = norm(H)
        a = p + "self_attn."
        sd[a + "q_a_proj.weight"] = lin(ql, H)
        sd[a + "q_a_layernorm.weight"] = norm(ql)
        sd[a + "q_b_proj.weight"] = lin(nh * (nope + rope), ql)
        sd[a + "kv_a_proj_with_mqa.weight"] = lin(kl + rope, H)
        sd[a + "kv_a_layernorm.weight"] = norm(kl)
        sd[a + "kv_b_proj.weight"] = lin(nh * (nope + vd), kl)
        sd[a + "o_proj.weight"] = lin(H, nh * vd)
        if with_indexer:
            ih, idim = d["index_n_heads"], d["index_head_dim"]
            sd[a + "indexer.wq_b.weight"] = lin(ih * idim, ql)
            sd[a + "indexer.wk.weight"] = lin(idim, H)
            sd[a + "indexer.k_norm.weight"] = norm(idim)
            sd[a + "indexer.k_norm.bias"] = (0.1 * rng.standard_normal(idim)).astype(np.float32)
            sd[a + "indexer.weights_proj.weight"] = lin(ih, H)
        sd[p + "post_attention_layernorm.weight"] = norm(H)
        m = p + "mlp."
        if i < d["first_k_dense_replace"]:
            sd[m + "gate_proj.weight"] = lin(I, H)
            sd[m + "up_proj.weight"] = lin(I, H)
            sd[m + "down_proj.weight"] = lin(H, I)
        else:
            sd[m + "gate.weight"] = lin(E, H)
            sd[m + "gate.e_score_correction_bias"] = (0.05 * rng.standard_normal(E)).astype(np.float32)
            for e in range(E):
                sd[m + f"experts.{e}.gate_proj.weight"] = lin(MI, H)
                sd[m + f"experts.{e}.up_proj.weight"] = lin(MI, H)
                sd[m + f"experts.{e}.down_proj.weight"] = lin(H, MI)
            SI = MI * d["n_shared_experts"]
            sd[m + "shared_experts.gate_proj.weight"] = lin(SI, H)
            sd[m + "shared_experts.up_proj.weight"] = lin(SI, H)
            sd[m + "shared_experts.down_proj.weight"] = lin(H, SI)
    sd["model.norm.weight"] = norm(H)
    sd["lm_head.weight"] = lin(V, H)
    return sd


def gguf_block(sd: dict[str, np.ndarray], i: int) -> list[tuple[str, np.ndarray]]:
    """One block's tensors under llama.cpp names (numpy shapes = reversed ggml ne)."""
    d = DIMS
    nh, kl, nope, vd = d["num_attention_heads"], d["kv_lora_rank"], d["qk_nope_head_dim"], d["v_head_dim"]
    p, a, m, b = f"model.layers.{i}.", f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp.", f"blk.{i}."
    out = [(b + "attn_norm.weight", sd[p + "input_layernorm.weight"])]
    if i < d["first_k_dense_replace"]:
        out += [(b + "ffn_down.weight", sd[m + "down_proj.weight"]),
                (b + "ffn_gate.weight", sd[m + "gate_proj.weight"]),
                (b + "ffn_up.weight", sd[m + "up_proj.weight"])]
    else:
        E = d["n_routed_experts"]
        for g, hf in (("down", "down_proj"), ("gate", "gate_proj"), ("up", "up_proj")):
            out.append((b + f"ffn_{g}_exps.weight",
                        np.stack([sd[m + f"experts.{e}.{hf}.weight"] for e in range(E)])))
        out += [(b + "exp_probs_b.bias", sd[m + "gate.e_score_correction_bias"]),
                (b + "ffn_gate_inp.weight", sd[m + "gate.weight"]),
                (b + "ffn_down_shexp.weight", sd[m + "shared_experts.down_proj.weight"]),
                (b + "ffn_gate_shexp.weight", sd[m + "shared_experts.gate_proj.weight"]),
                (b + "ffn_up_shexp.weight", sd[m + "shared_experts.up_proj.weight"])]
    out.append((b + "ffn_norm.weight", sd[p + "post_attention_layernorm.weight"]))
    if a + "indexer.wk.weight" in sd:
        out += [(b + "indexer.k_norm.bias", sd[a + "indexer.k_norm.bias"]),
                (b + "indexer.k_norm.weight", sd[a + "indexer.k_norm.weight"]),
                (b + "indexer.proj.weight", sd[a + "indexer.weights_proj.weight"]),
                (b + "indexer.attn_k.weight", sd[a + "indexer.wk.weight"]),
                (b + "indexer.attn_q_b.weight", sd[a + "indexer.wq_b.weight"])]
    kv_b = sd[a + "kv_b_proj.weight"].reshape(nh, nope + vd, kl)
    k_b = np.ascontiguousarray(kv_b[:, :nope, :].transpose(0, 2, 1))   # [nh, kv_lora, nope]
    v_b = np.ascontiguousarray(kv_b[:, nope:, :])                       # [nh, v, kv_lora]
    out += [(b + "attn_kv_a_norm.weight", sd[a + "kv_a_layernorm.weight"]),
            (b + "attn_kv_a_mqa.weight", sd[a + "kv_a_proj_with_mqa.weight"]),
            (b + "attn_k_b.weight", k_b),
            (b + "attn_v_b.weight", v_b),
            (b + "attn_output.weight", sd[a + "o_proj.weight"]),
            (b + "attn_q_a_norm.weight", sd[a + "q_a_layernorm.weight"]),
            (b + "attn_q_a.weight", sd[a + "q_a_proj.weight"]),
            (b + "attn_q_b.weight", sd[a + "q_b_proj.weight"])]
    return out


def keep_f32(name: str, arr: np.ndarray) -> bool:
    # like llama.cpp's q8_0: norms, biases, the router and indexer.proj stay F32
    return arr.ndim == 1 or name.endswith(("ffn_gate_inp.weight", "indexer.proj.weight"))


def write_gguf(out: str, sd: dict[str, np.ndarray], tok: dict, outtype: str) -> list[str]:
    d = DIMS
    L = d["num_hidden_layers"]
    type_tag = {"f32": "F32", "q8_0": "Q8_0"}[outtype]
    base = os.path.join(out, f"{NAME}-{type_tag}.gguf")
    w = gguf.GGUFWriter(base, ARCH)
    # -- model metadata (shard 1 only, as llama.cpp writes it)
    w.add_type("model")
    w.add_name(NAME)
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
    w.add_expert_group_count(1)
    w.add_expert_group_used_count(1)
    w.add_key_length(d["kv_lora_rank"] + d["qk_rope_head_dim"])
    w.add_value_length(d["kv_lora_rank"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if outtype == "f32" else gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_leading_dense_block_count(d["first_k_dense_replace"])
    w.add_vocab_size(len(tok["tokens"]))
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
    # indexer hyper-parameters are written even without indexer tensors (config, not weights)
    w.add_uint32(f"{ARCH}.attention.indexer.head_count", d["index_n_heads"])
    w.add_uint32(f"{ARCH}.attention.indexer.key_length", d["index_head_dim"])
    w.add_uint32(f"{ARCH}.attention.indexer.top_k", d["index_topk"])
    w.add_array(f"{ARCH}.attention.indexer.types", [True] * L)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("glm4")
    w.add_token_list(tok["tokens"])
    w.add_token_types(tok["types"])
    w.add_token_merges(tok["merges"])
    w.add_eos_token_id(tok["eos"])
    w.add_pad_token_id(tok["pad"])
    w.add_bos_token_id(tok["bos"])
    w.add_eot_token_id(tok["eot"])
    w.add_unk_token_id(tok["eos"])
    w.add_eom_token_id(tok["eom"])
    w.add_chat_template(CHAT_TEMPLATE)

    # -- tensors, with explicit shard placement (blocks spread evenly; output.* last)
    shards: list[list[tuple[str, np.ndarray]]] = [[] for _ in range(N_SHARDS)]
    shards[0].append(("token_embd.weight", sd["model.embed_tokens.weight"]))
    for i in range(L):
        shards[min(i * N_SHARDS // L, N_SHARDS - 1)] += gguf_block(sd, i)
    shards[-1] += [("output_norm.weight", sd["model.norm.weight"]),
                   ("output.weight", sd["lm_head.weight"])]
    for si, tensors in enumerate(shards):
        if si > 0:
            w.tensors.append({})   # start the next shard (GGUFWriter writes one file per dict)
        for name, arr in tensors:
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            if outtype == "q8_0" and not keep_f32(name, arr):
                q = gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0)
                w.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            else:
                w.add_tensor(name, arr)
    w.add_size_label(gguf.size_label(*w.get_total_parameter_count()))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return [str(p) for p in w.format_shard_names(w.path)]


def write_npz(path: str, sd: dict[str, np.ndarray]) -> None:
    """Like np.savez, but with fixed zip timestamps so the file is byte-identical."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for k, v in sd.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(v), allow_pickle=False)
            zi = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, buf.getvalue())


def write_config(out: str, tok: dict) -> None:
    d = DIMS
    L, k = d["num_hidden_layers"], d["first_k_dense_replace"]
    cfg = {
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": None, "eos_token_id": [tok["eos"], tok["eot"], tok["eom"]], "pad_token_id": tok["pad"],
        "dtype": "float32",
        "hidden_act": "silu", "hidden_size": d["hidden_size"], "num_hidden_layers": L,
        "first_k_dense_replace": k, "mlp_layer_types": ["dense"] * k + ["sparse"] * (L - k),
        "intermediate_size": d["intermediate_size"], "moe_intermediate_size": d["moe_intermediate_size"],
        "n_routed_experts": d["n_routed_experts"], "num_experts_per_tok": d["num_experts_per_tok"],
        "n_shared_experts": d["n_shared_experts"], "routed_scaling_factor": d["routed_scaling_factor"],
        "norm_topk_prob": True, "n_group": 1, "topk_group": 1,
        # as in GLM-5's own config.json (transformers ignores them; vLLM reads them)
        "scoring_func": "sigmoid", "topk_method": "noaux_tc", "moe_layer_freq": 1,
        "num_attention_heads": d["num_attention_heads"], "num_key_value_heads": d["num_key_value_heads"],
        "q_lora_rank": d["q_lora_rank"], "kv_lora_rank": d["kv_lora_rank"],
        "qk_nope_head_dim": d["qk_nope_head_dim"], "qk_rope_head_dim": d["qk_rope_head_dim"],
        "qk_head_dim": d["qk_nope_head_dim"] + d["qk_rope_head_dim"], "v_head_dim": d["v_head_dim"],
        "head_dim": d["qk_rope_head_dim"],
        "index_topk": d["index_topk"], "index_head_dim": d["index_head_dim"], "index_n_heads": d["index_n_heads"],
        "indexer_types": ["full"] * L, "layer_types": ["indexed_attention"] * L,
        "max_position_embeddings": d["max_position_embeddings"], "rms_norm_eps": d["rms_norm_eps"],
        "rope_parameters": {"rope_theta": d["rope_theta"], "rope_type": "default"},
        "initializer_range": INIT_STD, "mlp_bias": False, "num_nextn_predict_layers": 0,
        "tie_word_embeddings": False, "use_cache": True, "vocab_size": len(tok["tokens"]),
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    gen = {"eos_token_id": cfg["eos_token_id"], "pad_token_id": tok["pad"]}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(gen, f, indent=2)


def mla_dims(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 and int(p) % 16 == 0 for p in parts):
        raise argparse.ArgumentTypeError(f"expected three positive multiples of 16 as NOPE,ROPE,V, got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--outtype", choices=["f32", "q8_0"], default="f32")
    ap.add_argument("--with-indexer", action="store_true",
                    help="also write the DSA indexer tensors (as llama.cpp's current converter does)")
    ap.add_argument("--indexer-dims", type=lambda t: tuple(int(x) for x in t.split(",")), default=None,
                    metavar="HEADS,DIM", help="DSA indexer heads and head dim (default 4,64; GLM-5's are "
                                              "32,128, which CUDA's sparse indexer kernels expect)")
    ap.add_argument("--tokenizer-dir", help="copy tokenizer files from this HF folder instead of building one")
    ap.add_argument("--mla-dims", type=mla_dims, default=None, metavar="NOPE,ROPE,V",
                    help="qk_nope,qk_rope,v head dims (default 64,64,64; CUDA's MLA prefill takes "
                         "GLM-5's 192,64,256 or DeepSeek's 128,64,128)")
    args = ap.parse_args()
    if args.mla_dims:
        DIMS.update(zip(("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"), args.mla_dims))
    if args.indexer_dims:
        DIMS.update(zip(("index_n_heads", "index_head_dim"), args.indexer_dims))
    os.makedirs(args.out, exist_ok=True)
    if args.tokenizer_dir:
        for fn in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            src = os.path.join(args.tokenizer_dir, fn)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(args.out, fn))
    else:
        build_tokenizer(args.out)
    tok = tokenizer_metadata(args.out)
    assert len(tok["tokens"]) == 522, "the tiny model's vocab is 522 (512 BPE + 10 GLM specials)"
    sd = make_hf_state(args.seed, args.with_indexer)
    write_config(args.out, tok)
    files = write_gguf(args.out, sd, tok, args.outtype)
    write_npz(os.path.join(args.out, "hf_state.npz"), sd)
    n = sum(v.size for v in sd.values())
    print(f"wrote {len(files)} shards, {n} parameters:", *[os.path.basename(f) for f in files])


if __name__ == "__main__":
    main()
