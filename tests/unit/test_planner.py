"""The capacity planner: GLM-5's real dimensions, the demo and tiny GLM-5 GGUFs, the CLI's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.dsa_policy import PolicyError
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.planner import (
    EXIT_NO_GO, GIB, INDEXER_KEY_BYTES, QUANT_BLOCKS, Layout, dims_from_config, kv_bytes_per_token_per_layer,
    load_config_model, load_gguf_model, make_plan, rank_share, stage_layer_counts, with_dsa_attention,
)
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.roofline import roofline_for
from tests.conftest import DEMO_MODEL_DIR, GLM5_REFERENCE_DIR, REPO_ROOT
from vllm_fleet import plan as plan_cli

GLM5_CONFIG = REPO_ROOT / "tests" / "fixtures" / "planner" / "glm5-config.json"
DEMO_GGUF = Path(DEMO_MODEL_DIR) / "demo-qwen3-F32.gguf"
# The flagship: 8x RTX PRO 6000 Blackwell, 96 GB each (nvidia-smi: 97887 MiB, i.e. 95.6 GiB).
RTX_PRO_6000_GIB = 97887 / 1024
FLAGSHIP = "NVIDIA RTX PRO 6000 Blackwell"
# GLM-5 is "744B" (technical report); the config's dims give 743.9 B without the MTP layer.
GLM5_PARAMETERS = 744e9
PARAMETER_TOLERANCE = 0.005


def glm5(quant: str, gpus: int, tp: int, pp: int = 1, max_model_len: int = 32768):
    layout = Layout(gpus=gpus, gpu_memory_gib=RTX_PRO_6000_GIB, tp=tp, pp=pp, max_model_len=max_model_len,
                    gpu_name=FLAGSHIP)
    return make_plan(load_config_model(str(GLM5_CONFIG), quant), layout)


def test_block_sizes_are_ggmls():
    gguf = pytest.importorskip("gguf")
    for name, block in QUANT_BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]] == block, name
    assert QUANT_BLOCKS["Q4_K"] == (256, 144) and QUANT_BLOCKS["Q8_0"] == (32, 34)


def test_glm5_dims_from_the_config():
    dims = dims_from_config(json.loads(GLM5_CONFIG.read_text()))
    assert (dims.num_layers, dims.dense_layers, dims.expert_count, dims.expert_used, dims.shared_experts) == \
        (78, 3, 256, 8, 1)
    assert (dims.hidden_size, dims.vocab_size, dims.kv_lora_rank, dims.qk_rope_head_dim) == (6144, 154880, 512, 64)
    assert dims.is_mla and dims.index_head_dim == 128 and dims.mtp_layers == 1


def test_glm5_has_744b_parameters():
    plan = glm5("Q4_K", 8, 8)
    assert plan.parameters == pytest.approx(GLM5_PARAMETERS, rel=PARAMETER_TOLERANCE)
    # Q4_K is 4.5 bits a weight; norms and biases in F32 add a little
    assert plan.weight_bytes == pytest.approx(plan.parameters * 4.5 / 8, rel=0.001)


def test_glm5_q4_k_fits_8_gpus_with_room_for_32k_kv():
    plan = glm5("Q4_K", 8, 8)
    assert plan.go, plan.no_go
    assert plan.kv_cache_tokens >= 32768 and plan.max_model_len_fit >= 32768
    assert 45 * GIB < plan.weight_bytes_per_gpu < 55 * GIB
    parts = plan.weight_bytes_per_gpu_by_part
    assert parts["experts"] == pytest.approx(plan.weight_bytes_by_part["experts"] / 8, rel=1e-6)
    assert parts["embedding"] == pytest.approx(plan.weight_bytes_by_part["embedding"] / 8, rel=1e-6)
    assert parts["router"] == plan.weight_bytes_by_part["router"]  # replicated
    assert parts["indexer"] == plan.weight_bytes_by_part["indexer"]  # replicated
    assert plan.max_concurrency >= 1
    as_json = plan.as_dict()
    assert as_json["go"] and as_json["weight_bytes"] == plan.weight_bytes and as_json["kv_cache_tokens"] > 0
    assert as_json["roofline_tok_s"] == pytest.approx(1792e9 * 8 / plan.decode_bytes_per_token, rel=1e-3)
    assert as_json["roofline_tok_s_tp_aware"] < as_json["roofline_tok_s"]  # q_a/kv_a/indexer/router on every rank


def test_glm5_q4_k_on_4_gpus_is_no_go_and_names_the_fix():
    plan = glm5("Q4_K", 4, 4)
    assert not plan.go
    reason = " ".join(plan.no_go)
    assert "weights need" in reason and "smaller quant: Q3_K" in reason
    assert "add PP 2 (8 GPUs; this host has 4)" in reason  # beyond one host: PP before TP


def test_glm5_q8_0_on_8_gpus_is_no_go_and_names_the_fix():
    plan = glm5("Q8_0", 8, 8)
    assert not plan.go
    reason = " ".join(plan.no_go)
    assert "add PP 2" in reason and "pick a smaller quant: Q6_K" in reason


def test_a_context_too_long_for_the_kv_cache_says_how_long_fits():
    plan = glm5("Q6_K", 8, 8, max_model_len=202752)
    assert not plan.go and plan.kv_cache_tokens < 202752
    assert f"lower max_model_len to {plan.max_model_len_fit}" in plan.no_go[0]


def test_layout_errors_name_the_fix():
    assert "lower TP or PP" in " ".join(glm5("Q4_K", 8, 8, pp=2).no_go)
    assert "pick TP from" in " ".join(glm5("Q4_K", 8, 6).no_go)
    assert "lower max_model_len to 202752" in " ".join(glm5("Q4_K", 8, 8, max_model_len=300000).no_go)


def test_mla_kv_per_token_is_far_below_the_dense_formula():
    plan = glm5("Q4_K", 8, 8)
    # latent 512 + rope 64 in bf16, plus the indexer's fp8 key of 128 and one fp32 scale
    assert plan.kv_bytes_per_token_per_layer == (512 + 64) * 2 + 128 * INDEXER_KEY_BYTES + 4
    assert plan.kv_bytes_per_token == 78 * plan.kv_bytes_per_token_per_layer
    # 2 * 64 KV heads * (256 + 256) * 2 bytes per layer: about 51 times the MLA figure
    assert plan.kv_bytes_per_token_dense_formula / plan.kv_bytes_per_token > 40
    # MLA's latent is replicated per rank: TP does not shrink it
    assert glm5("Q4_K", 4, 2, pp=2).kv_bytes_per_token_per_layer == plan.kv_bytes_per_token_per_layer


def test_pp_splits_layers_as_vllm_does():
    assert stage_layer_counts(78, 1) == [78]
    assert stage_layer_counts(78, 4) == [19, 20, 20, 19]
    assert stage_layer_counts(78, 2) == [39, 39]
    two = glm5("Q4_K", 8, 4, pp=2)
    assert two.kv_bytes_per_token == 39 * two.kv_bytes_per_token_per_layer
    assert two.weight_bytes_per_gpu == pytest.approx(glm5("Q4_K", 8, 8).weight_bytes_per_gpu, rel=0.05)


def test_dense_attention_kv_heads_divide_by_tp_and_replicate_below_one_per_rank():
    dims = dims_from_config(json.loads((Path(DEMO_MODEL_DIR) / "config.json").read_text()))
    assert kv_bytes_per_token_per_layer(dims, 1) == 2 * (64 + 64) * 2
    assert kv_bytes_per_token_per_layer(dims, 2) == 1 * (64 + 64) * 2
    assert kv_bytes_per_token_per_layer(dims, 4) == 1 * (64 + 64) * 2  # 2 KV heads on 4 ranks: replicated
    assert rank_share("blk.0.attn_k.weight", dims, 4) == 0.5 and rank_share("blk.0.attn_q.weight", dims, 4) == 0.25


def test_demo_gguf_agrees_with_the_roofline_module():
    layout = Layout(gpus=1, gpu_memory_gib=24, tp=1, max_model_len=4096, gpu_name="NVIDIA H200")
    plan = make_plan(load_gguf_model([str(DEMO_GGUF)]), layout)
    roofline = roofline_for(str(DEMO_GGUF), 1, "NVIDIA H200", None)
    assert plan.go and plan.decode_bytes_per_token == roofline.bytes_per_token
    assert plan.weight_bytes == roofline.total_bytes
    assert plan.roofline["ceiling_tok_s"] == round(roofline.ceiling_tok_s, 1)
    config_plan = make_plan(load_config_model(str(Path(DEMO_MODEL_DIR) / "config.json"), "F32"), layout)
    assert config_plan.weight_bytes == plan.weight_bytes and config_plan.parameters == plan.parameters


@pytest.fixture(scope="module")
def tiny_glm5(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-glm5")
    subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "fixtures" / "models" / "make_glm5_tiny.py"), "--out", str(out),
                    "--with-indexer"],
                   check=True, capture_output=True, timeout=120)
    return out


def test_tiny_glm5_through_the_gguf_path_agrees_with_roofline_and_config(tiny_glm5: Path):
    shard = tiny_glm5 / "tiny-glm5-F32-00002-of-00003.gguf"  # any shard names the set
    model = load_gguf_model([str(shard)])
    assert model.dims.is_mla and model.dims.index_head_dim == 64 and model.dims.num_layers == 3
    layout = Layout(gpus=1, gpu_memory_gib=24, tp=1, max_model_len=4096, gpu_name="NVIDIA H200")
    plan = make_plan(model, layout)
    roofline = roofline_for(str(shard), 1, "NVIDIA H200", None)
    assert plan.decode_bytes_per_token == roofline.bytes_per_token and plan.weight_bytes == roofline.total_bytes
    assert plan.kv_bytes_per_token_per_layer == (512 + 64) * 2 + 64 * INDEXER_KEY_BYTES + 4
    # the same model from its config.json, all F32: the same inventory, so the same figures
    from_config = make_plan(load_config_model(str(tiny_glm5 / "config.json"), "F32"), layout)
    assert (from_config.parameters, from_config.weight_bytes, from_config.decode_bytes_per_token) == \
        (plan.parameters, plan.weight_bytes, plan.decode_bytes_per_token)
    assert plan.parameters == int(np_parameters(tiny_glm5))


def np_parameters(folder: Path) -> int:
    np = pytest.importorskip("numpy")
    with np.load(folder / "hf_state.npz") as state:
        return sum(state[name].size for name in state.files)


@pytest.mark.skipif(not GLM5_REFERENCE_DIR.is_dir(), reason="needs ../shared/glm5-reference")
def test_llama_cpp_converted_tiny_glm5_reads_the_same_as_its_config():
    shards = sorted(GLM5_REFERENCE_DIR.glob("tiny-glm5-F32-*.gguf"))
    layout = Layout(gpus=1, gpu_memory_gib=24, tp=1, max_model_len=4096)
    plan = make_plan(load_gguf_model([str(shards[0])]), layout)
    from_config = make_plan(load_config_model(str(GLM5_REFERENCE_DIR / "hf" / "config.json"), "F32"), layout)
    assert plan.weight_bytes == from_config.weight_bytes and plan.parameters == from_config.parameters
    assert plan.kv_bytes_per_token_per_layer == from_config.kv_bytes_per_token_per_layer


def test_cli_exit_codes_and_json(tmp_path: Path, capsys):
    common = ["--config", str(GLM5_CONFIG), "--gpus", "8", "--gpu-memory-gib", "96", "--tp", "8",
              "--max-model-len", "32768"]
    go = tmp_path / "go.json"
    assert plan_cli.main([*common, "--quant", "Q4_K", "--json", str(go)]) == 0
    report = json.loads(go.read_text())
    assert report["go"] and report["exit_code"] == 0 and report["kv_cache_tokens"] >= 32768
    assert report["weight_bytes"] > 0 and report["assumptions"]["activation_peak_gib"] > 0
    assert plan_cli.main([*common, "--quant", "Q8_0"]) == EXIT_NO_GO
    assert "no-go:" in capsys.readouterr().out
    assert plan_cli.main(["--gguf", str(tmp_path / "missing.gguf"), "--gpus", "1", "--gpu-memory-gib", "8",
                          "--tp", "1", "--max-model-len", "512"]) == 1
    with pytest.raises(SystemExit) as usage:
        plan_cli.main(["--config", str(GLM5_CONFIG), "--gpus", "8", "--gpu-memory-gib", "96", "--tp", "8",
                       "--max-model-len", "1"])
    assert usage.value.code == 2  # --config without --quant


def test_fleet_cli_dispatches_plan():
    from vllm_fleet import cli

    assert cli.main(["plan", "--gguf", str(DEMO_GGUF), "--gpus", "1", "--gpu-memory-gib", "8", "--tp", "1",
                     "--max-model-len", "4096"]) == 0


def test_dense_mla_drops_the_indexer_as_the_plugin_does():
    """The flagship's GPU (SM 12.x) serves GLM-5 with dense MLA: no indexer weights, no indexer key
    cache (the H200 run showed vLLM's KV tokens 10.3 % above a plan that counted them)."""
    model = load_config_model(str(GLM5_CONFIG), "Q4_K")
    layout = Layout(gpus=8, gpu_memory_gib=96, tp=8, max_model_len=32768)
    dense, decision = with_dsa_attention(model, "auto", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert decision.mode == "dense" and "SM 12" in decision.reason
    sparse_model, sparse = with_dsa_attention(model, "auto", "NVIDIA H200")
    assert sparse.mode == "sparse" and sparse_model is model
    with_indexer, without = make_plan(model, layout), make_plan(dense, layout)
    assert without.kv_bytes_per_token_per_layer == (512 + 64) * 2
    assert with_indexer.kv_bytes_per_token_per_layer - without.kv_bytes_per_token_per_layer == 128 * INDEXER_KEY_BYTES + 4
    assert without.weight_bytes_per_gpu_by_part["indexer"] == 0 < with_indexer.weight_bytes_per_gpu_by_part["indexer"]
    assert without.kv_cache_tokens > with_indexer.kv_cache_tokens
    forced, _decision = with_dsa_attention(model, "dense", "NVIDIA H200")
    assert forced.dims.index_head_dim == 0
    with pytest.raises(PolicyError, match="sparse DSA was requested"):
        with_dsa_attention(model, "sparse", "NVIDIA RTX PRO 6000 Blackwell")
    demo = load_gguf_model([str(DEMO_MODEL_DIR / "demo-qwen3-F32.gguf")])
    assert with_dsa_attention(demo, "dense", "NVIDIA H200") == (demo, None)
