"""Capacity planner: will this model fit these GPUs at this TP/PP and context, and how fast can it decode?

Everything is computed from one tensor inventory (name, bytes, elements; GGUF tensor names), read
from a GGUF's shards or built from an HF config.json and a quant type, so both inputs go through the
same arithmetic. Per-GPU figures follow how vLLM shards a model:

- column/row-parallel matrices (q_b, kv_b / k_b + v_b, o_proj, dense MLP, shared expert) divide by TP;
- routed experts divide by TP (vLLM's default for MoE is tensor-parallel experts, not EP);
- token embedding and lm_head are vocab-parallel: divide by TP;
- replicated on every rank: norms, the router, MLA's q_a / kv_a_mqa (ReplicatedLinear in vLLM's
  deepseek_v2.py), the DSA indexer ("no tensor parallel, just replicated" there), biases of those;
- PP splits the decoder layers as vLLM's get_pp_indices does; the embedding sits on the first stage,
  the final norm and lm_head on the last;
- MLA's latent KV cache has one head, so it is replicated on every TP rank (TP does not shrink it);
  dense attention's KV heads divide by TP (replicated when there are fewer KV heads than ranks).

Pure stdlib: it runs on the controller and on the hosts (the gguf reader is imported late, only by
the GGUF input). The assumptions that are estimates, not arithmetic, are the named constants below.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from .dsa_policy import DsaDecision, compute_capability_for, decide
from .roofline import (Roofline, TensorSize, bytes_touched_per_token, gpu_bandwidth_gbs, read_tensor_sizes,
                       split_siblings)

GIB = 1024**3

# ggml's block sizes: (weights per block, bytes per block), as ggml-common.h defines the block structs
# and gguf-py's GGML_QUANT_SIZES lists them (the unit test compares the two). Q4_K: 256 weights in
# 144 bytes (4.5 bits); Q8_0: 32 weights in 34 bytes (8.5 bits).
QUANT_BLOCKS: dict[str, tuple[int, int]] = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2),
    "Q8_0": (32, 34), "Q5_1": (32, 24), "Q5_0": (32, 22), "Q4_1": (32, 20), "Q4_0": (32, 18),
    "Q6_K": (256, 210), "Q5_K": (256, 176), "Q4_K": (256, 144), "Q3_K": (256, 110), "Q2_K": (256, 84),
    "IQ4_XS": (256, 136), "IQ3_XXS": (256, 98), "IQ2_XXS": (256, 66),
}
# The types a "pick a smaller quant" fix proposes, largest first.
QUANT_LADDER = ("BF16", "Q8_0", "Q6_K", "Q5_K", "Q4_K", "Q3_K", "Q2_K")

# --- assumptions (estimates; the H200 comparison of issue 18 is what checks them) -----------------
# Peak activation memory of vLLM's profiling run (a max_num_batched_tokens forward pass) per GPU.
ACTIVATION_PEAK_GIB = 2.0
# Memory vLLM counts as "non-torch" per GPU: CUDA context, NCCL and cuBLAS workspaces.
NON_TORCH_GIB = 1.0
# Memory CUDA graph capture takes per GPU at vLLM's default capture sizes.
CUDA_GRAPH_GIB = 1.0
# vLLM's default --gpu-memory-utilization: the share of each GPU's memory vLLM may use.
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
# KV cache element size: vLLM's kv_cache_dtype "auto" is the model dtype, bf16 for GGUF serving.
KV_CACHE_DTYPE_BYTES = 2
# Activation dtype: MLA backends dequantize kv_b_proj into W_UK / W_UV in it after loading, a second
# copy of kv_b per rank beside the quantized weight.
ACTIVATION_DTYPE_BYTES = 2
# DSA indexer key cache (vLLM's DeepseekV32IndexerCache): fp8 keys plus one fp32 scale per 128.
INDEXER_KEY_BYTES = 1
INDEXER_SCALE_BYTES = 4
INDEXER_QUANT_BLOCK = 128
# KV cache pages hold this many tokens; vLLM's token count is a whole number of pages.
KV_BLOCK_TOKENS = 16

# No-go exit code of `vllm-fleet plan` (0 go; 1 unreadable input; 2 bad usage).
EXIT_NO_GO = 6

LAYER_INDEX = re.compile(r"^blk\.(\d+)\.")
REPLICATED_ATTENTION = ("attn_q_a.", "attn_kv_a_mqa.")
PARTS = ("embedding", "attention", "indexer", "dense_mlp", "experts", "shared_expert", "router", "norms",
         "lm_head", "other")


@dataclass(frozen=True)
class ModelDims:
    """The dimensions the planner needs, from config.json or GGUF metadata."""

    architecture: str
    num_layers: int  # decoder layers vLLM builds; MTP layers are not counted
    hidden_size: int
    vocab_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int  # key head dim (dense attention)
    v_head_dim: int
    intermediate_size: int = 0
    dense_layers: int = 0  # leading dense layers of an MoE model (first_k_dense_replace)
    expert_count: int = 0
    expert_used: int = 0
    shared_experts: int = 0
    moe_intermediate_size: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0  # > 0: MLA
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    index_head_dim: int = 0  # > 0: DSA indexer (its key cache is part of the KV cache)
    index_n_heads: int = 0
    max_position_embeddings: int = 0
    mtp_layers: int = 0
    tie_word_embeddings: bool = False
    qk_norm: bool = False  # per-head q/k RMSNorm (Qwen3)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0


@dataclass(frozen=True)
class Model:
    """A model as the planner sees it: dims, the tensor inventory, where it came from."""

    dims: ModelDims
    tensors: tuple[TensorSize, ...]
    source: str
    quant: str  # the quant type given, or the file's mix ("Q4_K 80% ...")


@dataclass(frozen=True)
class Layout:
    gpus: int
    gpu_memory_gib: float
    tp: int
    pp: int = 1
    max_model_len: int = 32768
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    gpu_name: str | None = None
    bandwidth_gbs: float | None = None


@dataclass(frozen=True)
class Reserve:
    """Per-GPU memory that is neither weights nor KV cache (see the constants)."""

    activation_gib: float = ACTIVATION_PEAK_GIB
    non_torch_gib: float = NON_TORCH_GIB
    cuda_graph_gib: float = CUDA_GRAPH_GIB
    kv_dtype_bytes: int = KV_CACHE_DTYPE_BYTES

    @property
    def total_bytes(self) -> int:
        return int((self.activation_gib + self.non_torch_gib + self.cuda_graph_gib) * GIB)


@dataclass
class Plan:
    source: str
    architecture: str
    quant: str
    layout: Layout
    parameters: int
    weight_bytes: int  # the whole model as vLLM loads it (MTP layers left out)
    weight_bytes_by_part: dict[str, int]
    weight_bytes_per_gpu: int  # the fullest rank: its share of the weights plus MLA's absorbed copy
    weight_bytes_per_gpu_by_part: dict[str, int]
    mtp_bytes_skipped: int
    kv_bytes_per_token_per_layer: int  # on one rank
    kv_bytes_per_token: int  # on one rank (its stage's layers); MLA: the same on every TP rank
    kv_bytes_per_token_dense_formula: int  # 2 * kv_heads * head_dim per layer, as dense calculators count
    memory_budget_bytes_per_gpu: int
    reserve_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int
    kv_cache_tokens: int
    max_model_len_fit: int
    max_concurrency: float  # sequences of max_model_len that fit at once
    decode_bytes_per_token: int  # roofline.py's figure: bytes a decode step touches, whole model
    decode_bytes_per_token_per_gpu: int  # the same per rank, replicated tensors read on every rank
    roofline: dict[str, Any]
    roofline_tok_s_tp_aware: float | None
    no_go: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def go(self) -> bool:
        return not self.no_go

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["go"] = self.go
        out["roofline_tok_s"] = self.roofline.get("ceiling_tok_s")
        out["assumptions"] = assumptions()
        return out


def assumptions() -> dict[str, Any]:
    return {"activation_peak_gib": ACTIVATION_PEAK_GIB, "non_torch_gib": NON_TORCH_GIB,
            "cuda_graph_gib": CUDA_GRAPH_GIB, "kv_cache_dtype_bytes": KV_CACHE_DTYPE_BYTES,
            "activation_dtype_bytes": ACTIVATION_DTYPE_BYTES, "kv_block_tokens": KV_BLOCK_TOKENS,
            "indexer_key_bytes": INDEXER_KEY_BYTES, "indexer_scale_bytes_per_128": INDEXER_SCALE_BYTES,
            "experts": "tensor-parallel (vLLM's default, no expert parallelism)"}


# --- inputs -----------------------------------------------------------------------------------------

def quant_bytes(n_elements: int, quant: str) -> int:
    per_block, block_bytes = QUANT_BLOCKS[quant]
    return -(-n_elements // per_block) * block_bytes


def dims_from_config(config: dict[str, Any]) -> ModelDims:
    """ModelDims from an HF config.json (DeepSeek/GLM-5 MLA+MoE, Qwen3 dense or MoE, Llama-like)."""
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    experts = int(config.get("n_routed_experts") or config.get("num_experts") or 0)
    kv_lora = int(config.get("kv_lora_rank") or 0)
    head_dim = int(config.get("head_dim") or hidden // heads)
    nope, rope = int(config.get("qk_nope_head_dim") or 0), int(config.get("qk_rope_head_dim") or 0)
    sparse = "index_topk" in config  # DeepSeek-V3.2 / GLM-5 DSA
    return ModelDims(
        architecture=str(config.get("model_type", "?")),
        num_layers=int(config["num_hidden_layers"]),
        hidden_size=hidden, vocab_size=int(config["vocab_size"]), num_heads=heads,
        num_kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=nope + rope if kv_lora else head_dim,
        v_head_dim=int(config.get("v_head_dim") or head_dim),
        intermediate_size=int(config.get("intermediate_size") or 0),
        dense_layers=int(config.get("first_k_dense_replace") or 0) if experts else 0,
        expert_count=experts, expert_used=int(config.get("num_experts_per_tok") or 0) if experts else 0,
        shared_experts=int(config.get("n_shared_experts") or 0),
        moe_intermediate_size=int(config.get("moe_intermediate_size") or 0),
        q_lora_rank=int(config.get("q_lora_rank") or 0), kv_lora_rank=kv_lora,
        qk_nope_head_dim=nope, qk_rope_head_dim=rope,
        index_head_dim=int(config.get("index_head_dim") or 0) if sparse else 0,
        index_n_heads=int(config.get("index_n_heads") or 0) if sparse else 0,
        max_position_embeddings=int(config.get("max_position_embeddings") or 0),
        mtp_layers=int(config.get("num_nextn_predict_layers") or 0),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        qk_norm=str(config.get("model_type", "")).startswith("qwen3"),
    )


def layer_matrices(dims: ModelDims, layer: int) -> list[tuple[str, int, bool]]:
    """(GGUF tensor name, elements, is a matrix) of one decoder layer, llama.cpp's names."""
    h, p = dims.hidden_size, f"blk.{layer}."
    out: list[tuple[str, int, bool]] = [(p + "attn_norm.weight", h, False), (p + "ffn_norm.weight", h, False)]
    if dims.is_mla:
        q_in = dims.q_lora_rank or h
        if dims.q_lora_rank:
            out += [(p + "attn_q_a.weight", h * dims.q_lora_rank, True),
                    (p + "attn_q_a_norm.weight", dims.q_lora_rank, False)]
        out += [(p + ("attn_q_b.weight" if dims.q_lora_rank else "attn_q.weight"),
                 q_in * dims.num_heads * (dims.qk_nope_head_dim + dims.qk_rope_head_dim), True),
                (p + "attn_kv_a_mqa.weight", h * (dims.kv_lora_rank + dims.qk_rope_head_dim), True),
                (p + "attn_kv_a_norm.weight", dims.kv_lora_rank, False),
                (p + "attn_kv_b.weight",
                 dims.kv_lora_rank * dims.num_heads * (dims.qk_nope_head_dim + dims.v_head_dim), True),
                (p + "attn_output.weight", dims.num_heads * dims.v_head_dim * h, True)]
        if dims.index_head_dim:
            idx = dims.index_head_dim
            out += [(p + "indexer.attn_q_b.weight", q_in * dims.index_n_heads * idx, True),
                    (p + "indexer.attn_k.weight", h * idx, True),
                    (p + "indexer.k_norm.weight", idx, False), (p + "indexer.k_norm.bias", idx, False),
                    (p + "indexer.proj.weight", h * dims.index_n_heads, True)]
    else:
        out += [(p + "attn_q.weight", h * dims.num_heads * dims.head_dim, True),
                (p + "attn_k.weight", h * dims.num_kv_heads * dims.head_dim, True),
                (p + "attn_v.weight", h * dims.num_kv_heads * dims.v_head_dim, True),
                (p + "attn_output.weight", dims.num_heads * dims.v_head_dim * h, True)]
        if dims.qk_norm:
            out += [(p + "attn_q_norm.weight", dims.head_dim, False), (p + "attn_k_norm.weight", dims.head_dim, False)]
    if dims.expert_count and layer >= dims.dense_layers:
        e, mi = dims.expert_count, dims.moe_intermediate_size
        out += [(p + "ffn_gate_inp.weight", h * e, True), (p + "exp_probs_b.bias", e, False)]
        out += [(p + f"ffn_{kind}_exps.weight", e * h * mi, True) for kind in ("gate", "up", "down")]
        if dims.shared_experts:
            out += [(p + f"ffn_{kind}_shexp.weight", dims.shared_experts * h * mi, True)
                    for kind in ("gate", "up", "down")]
    else:
        out += [(p + f"ffn_{kind}.weight", h * dims.intermediate_size, True) for kind in ("gate", "up", "down")]
    return out


def tensors_from_config(dims: ModelDims, quant: str) -> list[TensorSize]:
    """The tensor inventory a GGUF of this config would hold: every matrix in quant, norms/biases F32."""
    if quant not in QUANT_BLOCKS:
        raise ValueError(f"unknown quant type {quant!r}; known: {', '.join(QUANT_BLOCKS)}")
    h, vocab = dims.hidden_size, dims.vocab_size
    named = [("token_embd.weight", vocab * h, True, vocab), ("output_norm.weight", h, False, 1)]
    if not dims.tie_word_embeddings:
        named.append(("output.weight", vocab * h, True, vocab))
    for layer in range(dims.num_layers):
        named += [(name, n, matrix, 1) for name, n, matrix in layer_matrices(dims, layer)]
    return [TensorSize(name, quant_bytes(n, quant if matrix else "F32"), rows, n) for name, n, matrix, rows in named]


def with_dsa_attention(model: Model, requested: str, gpu_name: str) -> tuple[Model, DsaDecision | None]:
    """The model as vLLM serves it under the DSA policy (dsa_policy.decide): with dense MLA the
    GGUF plugin drops the indexer, so neither its weights nor its key cache take memory. A model
    without DSA comes back unchanged. Raises dsa_policy.PolicyError for a sparse request that
    cannot run on that GPU."""
    if not model.dims.index_head_dim:
        return model, None
    capability = compute_capability_for(gpu_name)
    decision = decide([capability] if capability else [], has_indexer=True, requested=requested)
    if decision.mode == "sparse":
        return model, decision
    dense = Model(dims=replace(model.dims, index_head_dim=0, index_n_heads=0),
                  tensors=tuple(t for t in model.tensors if part_of(t.name) != "indexer"),
                  source=model.source, quant=model.quant)
    return dense, decision


def load_config_model(config_path: str, quant: str) -> Model:
    dims = dims_from_config(json.loads(Path(config_path).read_text()))
    return Model(dims, tuple(tensors_from_config(dims, quant)), f"{config_path} as {quant}", quant)


def read_gguf_metadata(path: Path) -> dict[str, Any]:
    """Scalar metadata of a GGUF file (llama.cpp writes all model keys into shard 1)."""
    from gguf import GGUFReader  # imported late: only where the gguf package is installed

    out: dict[str, Any] = {}
    for key, field_ in GGUFReader(str(path)).fields.items():
        if key.startswith("tokenizer.") or key.startswith("GGUF."):
            continue
        value = field_.contents()
        if isinstance(value, (int, float, str, bool)):
            out[key] = value
    return out


def dims_from_gguf(meta: dict[str, Any], tensors: Iterable[TensorSize]) -> ModelDims:
    """ModelDims from GGUF metadata keys ({arch}.block_count, ...) and the tensor names."""
    arch = str(meta["general.architecture"])
    tensors = list(tensors)

    def key(name: str, default: Any = 0) -> Any:
        return meta.get(f"{arch}.{name}", default)

    names = {t.name for t in tensors}
    vocab = next((t.rows for t in tensors if t.name == "token_embd.weight"), int(key("vocab_size", 0)))
    mtp = int(key("nextn_predict_layers", 0))
    kv_lora = int(key("attention.kv_lora_rank", 0))
    heads = int(key("attention.head_count"))
    rope = int(key("rope.dimension_count", 0)) if kv_lora else 0
    key_mla = int(key("attention.key_length_mla", 0))
    has_indexer = any(".indexer." in name for name in names)
    return ModelDims(
        architecture=arch, num_layers=int(key("block_count")) - mtp,
        hidden_size=int(key("embedding_length")), vocab_size=vocab, num_heads=heads,
        num_kv_heads=int(key("attention.head_count_kv", heads)),
        head_dim=key_mla if kv_lora else int(key("attention.key_length", int(key("embedding_length")) // heads)),
        v_head_dim=int(key("attention.value_length_mla", 0)) if kv_lora else int(key("attention.value_length", 0)),
        intermediate_size=int(key("feed_forward_length", 0)),
        dense_layers=int(key("leading_dense_block_count", 0)),
        expert_count=int(key("expert_count", 0)), expert_used=int(key("expert_used_count", 0)),
        shared_experts=int(key("expert_shared_count", 0)),
        moe_intermediate_size=int(key("expert_feed_forward_length", 0)),
        q_lora_rank=int(key("attention.q_lora_rank", 0)), kv_lora_rank=kv_lora,
        qk_nope_head_dim=key_mla - rope if kv_lora else 0, qk_rope_head_dim=rope,
        index_head_dim=int(key("attention.indexer.key_length", 0)) if has_indexer else 0,
        index_n_heads=int(key("attention.indexer.head_count", 0)) if has_indexer else 0,
        max_position_embeddings=int(key("context_length", 0)), mtp_layers=mtp,
        tie_word_embeddings="output.weight" not in names,
    )


def quant_mix(tensors: Iterable[TensorSize]) -> str:
    """Average bits per weight of the matrices, e.g. '4.84 bits/weight'."""
    tensors = [t for t in tensors if t.n_elements]
    weights = sum(t.n_elements for t in tensors)
    return f"{8 * sum(t.n_bytes for t in tensors) / weights:.2f} bits/weight" if weights else "?"


def load_gguf_model(paths: list[str]) -> Model:
    """A model from its GGUF files: any shard names the whole set; every shard's tensors are read."""
    files: list[Path] = []
    for given in paths:
        files += [p for p in split_siblings(Path(given)) if p not in files]
    tensors, _expert_count, _expert_used_count = read_tensor_sizes(files)
    dims = dims_from_gguf(read_gguf_metadata(files[0]), tensors)
    return Model(dims, tuple(tensors), ", ".join(p.name for p in files), quant_mix(tensors))


# --- how vLLM places each tensor --------------------------------------------------------------------

def part_of(name: str) -> str:
    if name.startswith("token_embd."):
        return "embedding"
    if name.startswith("output."):
        return "lm_head"
    if "norm." in name:
        return "norms"
    if "_exps." in name:
        return "experts"
    if "_shexp." in name:
        return "shared_expert"
    if "ffn_gate_inp." in name or "exp_probs_b." in name:
        return "router"
    if ".indexer." in name:
        return "indexer"
    if ".attn_" in name:
        return "attention"
    if ".ffn_" in name:
        return "dense_mlp"
    return "other"


def rank_share(name: str, dims: ModelDims, tp: int) -> float:
    """The fraction of a tensor one TP rank holds."""
    part = part_of(name)
    if part in ("norms", "router", "indexer", "other"):
        return 1.0
    if part == "attention":
        if any(mark in name for mark in REPLICATED_ATTENTION):
            return 1.0
        if (".attn_k." in name or ".attn_v." in name) and dims.num_kv_heads < tp:
            return 1.0 / dims.num_kv_heads  # fewer KV heads than ranks: vLLM replicates them
    return 1.0 / tp


def layer_of(name: str) -> int | None:
    match = LAYER_INDEX.match(name)
    return int(match.group(1)) if match else None


def stage_layer_counts(num_layers: int, pp: int) -> list[int]:
    """Decoder layers per PP stage, as vLLM's get_pp_indices splits them (the remainder goes to the
    stages just before the last one, which also holds the lm_head)."""
    counts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        counts[-i] += 1
    return counts


def stage_of(name: str, starts: list[int], pp: int) -> int:
    layer = layer_of(name)
    if layer is None:
        return 0 if name.startswith("token_embd.") else pp - 1
    return max(i for i, start in enumerate(starts) if layer >= start)


def is_mtp(name: str, dims: ModelDims) -> bool:
    layer = layer_of(name)
    return name.startswith("nextn.") or (layer is not None and layer >= dims.num_layers)


# --- the arithmetic ---------------------------------------------------------------------------------

def kv_bytes_per_token_per_layer(dims: ModelDims, tp: int, kv_dtype_bytes: int = KV_CACHE_DTYPE_BYTES) -> int:
    """KV-cache bytes one token adds to one layer on one rank.

    MLA caches the compressed latent plus the shared rope key, one "head", on every rank; DSA adds the
    indexer's fp8 key with its scales. Dense attention caches K and V of the rank's KV heads.
    """
    if dims.is_mla:
        latent = (dims.kv_lora_rank + dims.qk_rope_head_dim) * kv_dtype_bytes
        index = 0
        if dims.index_head_dim:
            index = dims.index_head_dim * INDEXER_KEY_BYTES + \
                -(-dims.index_head_dim // INDEXER_QUANT_BLOCK) * INDEXER_SCALE_BYTES
        return latent + index
    kv_heads = max(1, dims.num_kv_heads // tp)
    return kv_heads * (dims.head_dim + dims.v_head_dim) * kv_dtype_bytes


def kv_bytes_dense_formula(dims: ModelDims, kv_dtype_bytes: int = KV_CACHE_DTYPE_BYTES) -> int:
    """What a dense-attention calculator says per token (all layers, TP 1): 2 * kv_heads * head_dim
    per layer, with the config's KV heads and full K / V head dims even for MLA."""
    return dims.num_layers * dims.num_kv_heads * (dims.head_dim + dims.v_head_dim) * kv_dtype_bytes


def mla_absorbed_bytes(dims: ModelDims, tp: int, layers: int) -> int:
    """The activation-dtype copy of kv_b (W_UK, W_UV) an MLA backend keeps on each rank."""
    if not dims.is_mla:
        return 0
    per_layer = (dims.num_heads // tp) * dims.kv_lora_rank * (dims.qk_nope_head_dim + dims.v_head_dim)
    return per_layer * layers * ACTIVATION_DTYPE_BYTES


@dataclass
class StageWeights:
    layers: int
    by_part: dict[str, float]
    decode_bytes: float  # bytes one rank of this stage reads per decode step


def stage_weights(model: Model, layout: Layout) -> tuple[list[StageWeights], int]:
    """Per-stage, per-rank weights and decode bytes; and the MTP bytes left out."""
    dims = model.dims
    counts = stage_layer_counts(dims.num_layers, layout.pp)
    starts = [sum(counts[:i]) for i in range(layout.pp)]
    stages = [StageWeights(c, {part: 0.0 for part in PARTS}, 0.0) for c in counts]
    mtp = 0
    for tensor in model.tensors:
        if is_mtp(tensor.name, dims):
            mtp += tensor.n_bytes
            continue
        stage = stages[stage_of(tensor.name, starts, layout.pp)]
        share = rank_share(tensor.name, dims, layout.tp)
        stage.by_part[part_of(tensor.name)] += tensor.n_bytes * share
        stage.decode_bytes += bytes_touched_per_token([tensor], dims.expert_count, dims.expert_used) * share
    for stage in stages:
        stage.by_part["attention"] += mla_absorbed_bytes(dims, layout.tp, stage.layers)
    return stages, mtp


def layout_problems(dims: ModelDims, layout: Layout) -> list[str]:
    problems = []
    if layout.tp < 1 or layout.pp < 1:
        problems.append(f"TP {layout.tp} / PP {layout.pp}: both must be at least 1")
        return problems
    if layout.tp * layout.pp > layout.gpus:
        problems.append(f"TP {layout.tp} x PP {layout.pp} needs {layout.tp * layout.pp} GPUs, the host has "
                        f"{layout.gpus}: lower TP or PP to fit {layout.gpus} GPUs")
    if dims.num_heads % layout.tp:
        divisors = [t for t in range(1, layout.gpus + 1) if dims.num_heads % t == 0]
        problems.append(f"{dims.num_heads} attention heads do not divide by TP {layout.tp}: "
                        f"pick TP from {divisors}")
    if layout.pp > dims.num_layers:
        problems.append(f"PP {layout.pp} exceeds the {dims.num_layers} layers: lower PP")
    if dims.max_position_embeddings and layout.max_model_len > dims.max_position_embeddings:
        problems.append(f"max_model_len {layout.max_model_len} exceeds the model's context "
                        f"{dims.max_position_embeddings}: lower max_model_len to {dims.max_position_embeddings}")
    return problems


def kv_tokens(budget: int, weights: int, reserve: int, per_token: int) -> tuple[int, int]:
    """(bytes left for the KV cache, whole pages of tokens they hold)."""
    free = max(0, budget - weights - reserve)
    if per_token <= 0:
        return free, 0
    return free, free // (per_token * KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS


def fits(model_dims: ModelDims, tensors: Iterable[TensorSize], layout: Layout, reserve: Reserve) -> bool:
    """Whether weights and a max_model_len KV cache fit at this layout (used to find fixes)."""
    plan = make_plan(Model(model_dims, tuple(tensors), "", ""), layout, reserve, suggest=False)
    return plan.go


def fix_suggestions(model: Model, layout: Layout, reserve: Reserve) -> list[str]:
    """Layouts or quants that would fit, named for the no-go message."""
    fixes: list[str] = []
    dims, tensors = model.dims, model.tensors
    candidates = [(layout.tp * 2, layout.pp), (layout.tp, layout.pp * 2), (layout.tp * 2, layout.pp * 2),
                  (layout.tp * 4, layout.pp), (layout.tp, layout.pp * 4)]
    # this host's GPUs first; beyond it, fewer GPUs first and PP (which spans hosts) before TP
    candidates.sort(key=lambda c: (c[0] * c[1] > layout.gpus, c[0] * c[1], c[0] > layout.tp))
    for tp, pp in candidates:
        if dims.num_heads % tp or pp > dims.num_layers:
            continue
        bigger = Layout(**{**asdict(layout), "tp": tp, "pp": pp, "gpus": max(layout.gpus, tp * pp)})
        if fits(dims, tensors, bigger, reserve):
            how = (f"raise TP to {tp}" if pp == layout.pp
                   else f"add PP {pp}" if tp == layout.tp else f"TP {tp} x PP {pp}")
            more = "" if tp * pp <= layout.gpus else f" ({tp * pp} GPUs; this host has {layout.gpus})"
            fixes.append(how + more)
            break
    if model.quant in QUANT_LADDER:
        for quant in QUANT_LADDER[QUANT_LADDER.index(model.quant) + 1:]:
            if fits(dims, tensors_from_config(dims, quant), layout, reserve):
                fixes.append(f"pick a smaller quant: {quant} fits this layout")
                break
    else:
        bits = bits_that_fit(model, layout, reserve)
        if bits:
            fixes.append(f"pick a smaller quant: at most {bits:.2f} bits/weight fits this layout "
                         f"(this file: {model.quant})")
    return fixes


def bits_that_fit(model: Model, layout: Layout, reserve: Reserve) -> float | None:
    """Average bits per weight whose weights leave room for one max_model_len sequence (scaled)."""
    stages, _mtp_bytes = stage_weights(model, layout)
    weights = max(sum(s.by_part.values()) for s in stages)
    layers = max(s.layers for s in stages)
    kv = kv_bytes_per_token_per_layer(model.dims, layout.tp, reserve.kv_dtype_bytes) * layers * layout.max_model_len
    room = layout.gpu_memory_gib * GIB * layout.gpu_memory_utilization - reserve.total_bytes - kv
    loaded = [t for t in model.tensors if t.n_elements]
    if room <= 0 or not loaded or weights <= 0:
        return None
    current = 8 * sum(t.n_bytes for t in loaded) / sum(t.n_elements for t in loaded)
    return current * room / weights


def make_plan(model: Model, layout: Layout, reserve: Reserve | None = None, suggest: bool = True) -> Plan:
    reserve = reserve or Reserve()
    dims = model.dims
    problems = layout_problems(dims, layout)
    tp, pp = max(layout.tp, 1), max(layout.pp, 1)
    layout_ok = Layout(**{**asdict(layout), "tp": tp, "pp": pp})
    stages, mtp = stage_weights(model, layout_ok)
    per_stage_weights = [int(sum(s.by_part.values())) for s in stages]
    fullest = max(range(pp), key=lambda i: per_stage_weights[i])
    per_layer_kv = kv_bytes_per_token_per_layer(dims, tp, reserve.kv_dtype_bytes)
    budget = int(layout.gpu_memory_gib * GIB * layout.gpu_memory_utilization)
    # the KV cache is sized per stage; vLLM uses the smallest token count of all ranks
    per_stage = [kv_tokens(budget, w, reserve.total_bytes, per_layer_kv * s.layers)
                 for w, s in zip(per_stage_weights, stages)]
    tightest = min(range(pp), key=lambda i: per_stage[i][1])
    kv_free, tokens = per_stage[tightest]
    max_len = min(tokens, dims.max_position_embeddings or tokens)
    loaded = [t for t in model.tensors if not is_mtp(t.name, dims)]
    by_part = {part: 0 for part in PARTS}
    for tensor in loaded:
        by_part[part_of(tensor.name)] += tensor.n_bytes
    bandwidth, source = layout.bandwidth_gbs, "given"
    if bandwidth is None and layout.gpu_name:
        bandwidth = gpu_bandwidth_gbs(layout.gpu_name)
        source = f"table: {layout.gpu_name}" if bandwidth else f"unknown GPU {layout.gpu_name!r}"
    elif bandwidth is None:
        source = "no GPU and no bandwidth given"
    decode_bytes = bytes_touched_per_token(loaded, dims.expert_count, dims.expert_used)
    # one stream: every stage in turn, the TP ranks of a stage in parallel
    roofline = Roofline(decode_bytes, sum(t.n_bytes for t in loaded), dims.expert_count, dims.expert_used,
                        bandwidth, tp, source)
    per_gpu_decode = int(sum(s.decode_bytes for s in stages))
    plan = Plan(
        source=model.source, architecture=dims.architecture, quant=model.quant, layout=layout,
        parameters=sum(t.n_elements for t in loaded),
        weight_bytes=sum(t.n_bytes for t in loaded), weight_bytes_by_part=by_part,
        weight_bytes_per_gpu=per_stage_weights[fullest],
        weight_bytes_per_gpu_by_part={k: int(v) for k, v in stages[fullest].by_part.items()},
        mtp_bytes_skipped=mtp,
        kv_bytes_per_token_per_layer=per_layer_kv,
        kv_bytes_per_token=per_layer_kv * stages[tightest].layers,
        kv_bytes_per_token_dense_formula=kv_bytes_dense_formula(dims, reserve.kv_dtype_bytes),
        memory_budget_bytes_per_gpu=budget, reserve_bytes_per_gpu=reserve.total_bytes,
        kv_cache_bytes_per_gpu=kv_free, kv_cache_tokens=tokens, max_model_len_fit=max_len,
        max_concurrency=round(tokens / layout.max_model_len, 2) if layout.max_model_len else 0.0,
        decode_bytes_per_token=decode_bytes, decode_bytes_per_token_per_gpu=per_gpu_decode,
        roofline=roofline.as_dict(),
        roofline_tok_s_tp_aware=round(bandwidth * 1e9 / per_gpu_decode, 1) if bandwidth and per_gpu_decode else None,
        no_go=list(problems),
    )
    if mtp:
        plan.notes.append(f"{mtp / GIB:.1f} GiB of MTP (next-token prediction) layers are not loaded by vLLM")
    need = per_stage_weights[fullest] + reserve.total_bytes
    if need > budget:
        plan.no_go.append(f"weights need {per_stage_weights[fullest] / GIB:.1f} GiB per GPU "
                          f"(+{reserve.total_bytes / GIB:.1f} "
                          f"GiB activations/graphs), the budget is {budget / GIB:.1f} GiB "
                          f"({layout.gpu_memory_gib:.1f} GiB x {layout.gpu_memory_utilization:g})")
    elif tokens < layout.max_model_len:
        plan.no_go.append(f"the KV cache holds {tokens} tokens per GPU, max_model_len {layout.max_model_len} needs "
                          f"more: lower max_model_len to {max_len}")
    if suggest and len(plan.no_go) > len(problems):
        fixes = fix_suggestions(model, layout_ok, reserve)
        if fixes:
            plan.no_go[-1] += "; or " + "; or ".join(fixes) if "lower max_model_len" in plan.no_go[-1] \
                else ": " + "; or ".join(fixes)
    return plan


def plan_for(layout: Layout, dsa_attention: str = "auto", gguf: list[str] | None = None,
             config: str | None = None, quant: str | None = None) -> tuple[Plan, DsaDecision | None]:
    """The plan for a model given as GGUF files or as config.json plus a quant type (the CLI's and the
    preflight's one path). Raises OSError/ValueError/KeyError for an unreadable model and
    dsa_policy.PolicyError for a DSA mode the GPU cannot run."""
    if gguf:
        model = load_gguf_model(gguf)
    elif config and quant:
        model = load_config_model(config, quant)
    else:
        raise ValueError("the planner needs GGUF files, or a config.json and a quant type")
    model, dsa = with_dsa_attention(model, dsa_attention, layout.gpu_name or "")
    return make_plan(model, layout), dsa
