"""The committed demo model is exactly what tests/fixtures/models/make_demo_model.py writes, and vLLM-servable in shape."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from gguf import GGUFReader

from tests.conftest import DEMO_MODEL_DIR, REPO_ROOT


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_generator_reproduces_the_committed_files(tmp_path: Path):
    subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "fixtures" / "models" / "make_demo_model.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    committed = {p.name: sha256(p) for p in DEMO_MODEL_DIR.iterdir()}
    generated = {p.name: sha256(p) for p in tmp_path.iterdir()}
    assert generated == committed


def test_gguf_and_config_describe_the_same_qwen3():
    config = json.loads((DEMO_MODEL_DIR / "config.json").read_text())
    reader = GGUFReader(DEMO_MODEL_DIR / "demo-qwen3-F32.gguf")

    def field(key: str):
        return reader.get_field(key).contents()

    assert field("general.architecture") == "qwen3" == config["model_type"]
    assert field("qwen3.embedding_length") == config["hidden_size"]
    assert field("qwen3.block_count") == config["num_hidden_layers"]
    assert field("qwen3.attention.head_count") == config["num_attention_heads"]
    assert field("qwen3.attention.head_count_kv") == config["num_key_value_heads"]
    # The CPU attention kernels refuse head_dim 16; 32 is the floor.
    assert config["head_dim"] >= 32
    tokenizer = json.loads((DEMO_MODEL_DIR / "tokenizer.json").read_text())
    vocab = len(tokenizer["model"]["vocab"]) + len([t for t in tokenizer["added_tokens"] if t["content"] not in tokenizer["model"]["vocab"]])
    assert vocab == config["vocab_size"] == len(field("tokenizer.ggml.tokens"))


def test_demo_model_stays_small():
    assert sum(p.stat().st_size for p in DEMO_MODEL_DIR.iterdir()) < 10 * 1024 * 1024
