"""tests/fixtures/models/make_glm5_tiny.py --mla-dims: a tiny GLM-5 whose MLA head dims CUDA's MLA prefill accepts
(GLM-5's own 192/64/256), and benchmarks/gpu/tiny_variants.py's quantized variants of it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np

from tests.conftest import REPO_ROOT


def make(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "fixtures" / "models" / "make_glm5_tiny.py"), "--out", str(out), *extra],
                          capture_output=True, text=True, check=False)


def test_glm5_dims_reach_config_gguf_metadata_and_split_kv_b(tmp_path: Path):
    assert make(tmp_path, "--mla-dims", "192,64,256").returncode == 0
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert (cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["qk_head_dim"]) == (192, 64, 256, 256)
    reader = gguf.GGUFReader(tmp_path / "tiny-glm5-F32-00001-of-00003.gguf")
    assert reader.fields["glm-dsa.attention.key_length_mla"].contents() == 256
    assert reader.fields["glm-dsa.attention.value_length_mla"].contents() == 256
    shapes = {t.name: tuple(int(n) for n in reversed(t.shape)) for t in reader.tensors}
    assert shapes["blk.0.attn_k_b.weight"] == (4, 512, 192)   # [heads, kv_lora, nope]
    assert shapes["blk.0.attn_v_b.weight"] == (4, 256, 512)   # [heads, v, kv_lora]
    assert shapes["blk.0.attn_q_b.weight"] == (4 * 256, 128)


def test_variants_of_a_model_without_converter_output_are_quantized_from_f32(tmp_path: Path):
    assert make(tmp_path, "--mla-dims", "192,64,256").returncode == 0
    run = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks" / "gpu" / "tiny_variants.py"), str(tmp_path), str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    q8 = {t.name: t for t in gguf.GGUFReader(tmp_path / "tiny-glm5-Q8_0-noidx.gguf").tensors}
    assert q8["blk.0.attn_k_b.weight"].tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert q8["blk.1.ffn_gate_inp.weight"].tensor_type == gguf.GGMLQuantizationType.F32  # router stays F32
    state = np.load(tmp_path / "hf_state.npz")
    back = gguf.quants.dequantize(q8["output.weight"].data, gguf.GGMLQuantizationType.Q8_0)
    assert np.abs(back - state["lm_head.weight"]).max() < 0.01 * np.abs(state["lm_head.weight"]).max()


def test_bad_dims_are_refused_by_name(tmp_path: Path):
    run = make(tmp_path, "--mla-dims", "192,64")
    assert run.returncode != 0 and "--mla-dims" in run.stderr and "NOPE,ROPE,V" in run.stderr
    assert not (tmp_path / "config.json").exists()
