"""Bytes a decode step touches, the bandwidth table, and the reader on a real GGUF."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.roofline import (
    Roofline, TensorSize, bytes_touched_per_token, gpu_bandwidth_gbs, roofline_for, split_siblings,
)
from tests.conftest import DEMO_MODEL_DIR, GLM5_REFERENCE_DIR


def test_experts_count_by_the_share_the_router_picks_and_embedding_by_one_row():
    tensors = [
        TensorSize("token_embd.weight", 1000 * 64, rows=1000),
        TensorSize("output.weight", 64_000, rows=1000),
        TensorSize("blk.0.attn_q.weight", 4096, rows=64),
        TensorSize("blk.1.ffn_up_exps.weight", 256 * 1000, rows=256),
        TensorSize("blk.1.ffn_gate_inp.weight", 512, rows=256),
    ]
    assert bytes_touched_per_token(tensors, expert_count=256, expert_used=8) == 64 + 64_000 + 4096 + 8 * 1000 + 512


def test_dense_model_counts_everything_but_the_embedding_table():
    tensors = [TensorSize("token_embd.weight", 6400, rows=100), TensorSize("blk.0.ffn_up.weight", 1000, rows=10)]
    assert bytes_touched_per_token(tensors, expert_count=0, expert_used=0) == 64 + 1000


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H200", 4800.0),
    ("NVIDIA H100 80GB HBM3", 3350.0),
    ("NVIDIA H100 PCIe", 2000.0),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 1792.0),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 1792.0),
    ("Some Future GPU", None),
])
def test_bandwidth_by_gpu_name(name, expected):
    assert gpu_bandwidth_gbs(name) == expected


def test_ceiling_scales_with_gpus_and_fraction():
    roofline = Roofline(bytes_per_token=10**9, total_bytes=0, expert_count=0, expert_used=0,
                        bandwidth_gbs=1792.0, num_gpus=8, bandwidth_source="given")
    assert roofline.ceiling_tok_s == pytest.approx(14336.0)
    assert roofline.fraction(1433.6) == pytest.approx(0.1)
    assert Roofline(1, 0, 0, 0, None, 1, "none").ceiling_tok_s is None


def test_split_siblings_lists_every_shard(tmp_path):
    first = tmp_path / "GLM-5-Q4-00001-of-00003.gguf"
    assert [p.name for p in split_siblings(first)] == [f"GLM-5-Q4-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert split_siblings(tmp_path / "one.gguf") == [tmp_path / "one.gguf"]


def test_reads_the_demo_gguf():
    path = Path(DEMO_MODEL_DIR) / "demo-qwen3-F32.gguf"
    roofline = roofline_for(str(path), 1, None, None)
    assert roofline.ceiling_tok_s is None and "no GPU" in roofline.bandwidth_source
    assert 0.8 * path.stat().st_size < roofline.total_bytes <= path.stat().st_size
    # everything but all rows of the embedding table but one: F32 rows of hidden size
    assert 0 < roofline.bytes_per_token < roofline.total_bytes
    with_bandwidth = roofline_for(str(path), 2, "NVIDIA H200", None)
    assert with_bandwidth.ceiling_tok_s == pytest.approx(4800e9 * 2 / roofline.bytes_per_token)


# Hand-computed from each file's tensor table: every weight read once per token, the embedding by
# one row, and for the MoE model the routed experts by the share the router picks (2 of 8).
@pytest.mark.parametrize("path, bytes_per_token", [
    (Path(DEMO_MODEL_DIR) / "demo-qwen3-F32.gguf", 6_695_936),
    pytest.param(GLM5_REFERENCE_DIR / "tiny-glm5-F32-00001-of-00003.gguf", 11_983_936,
                 marks=pytest.mark.skipif(not GLM5_REFERENCE_DIR.is_dir(), reason="../shared/glm5-reference not present")),
])
def test_bytes_per_token_of_the_demo_and_the_glm5_reference(path: Path, bytes_per_token: int):
    assert roofline_for(str(path), 1, None, None).bytes_per_token == bytes_per_token
