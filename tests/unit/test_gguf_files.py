from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gguf_files import inspect_model_dir, missing_split_parts
from tests.conftest import DEMO_MODEL_DIR, GLM5_REFERENCE_DIR

DEMO_GGUF = "demo-qwen3-F32.gguf"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    target = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, target)
    return target


def test_demo_model_is_servable(model_dir: Path):
    report = inspect_model_dir(str(model_dir), [DEMO_GGUF])
    assert report.ok, report.problems
    assert report.architecture == "qwen3"
    assert report.model_type == "qwen3"
    assert report.gguf_files[0].size == (model_dir / DEMO_GGUF).stat().st_size
    assert {"config.json", "tokenizer.json", "tokenizer_config.json"} <= set(report.hf_files)


def test_missing_directory_is_named(tmp_path: Path):
    report = inspect_model_dir(str(tmp_path / "nope"), [DEMO_GGUF])
    assert not report.ok
    assert report.problems == [f"model source directory not found: {tmp_path / 'nope'}"]


def test_missing_config_and_tokenizer_are_named(model_dir: Path):
    (model_dir / "config.json").unlink()
    (model_dir / "tokenizer.json").unlink()
    problems = inspect_model_dir(str(model_dir), [DEMO_GGUF]).problems
    assert any("config.json not found beside the GGUF" in p for p in problems)
    assert any("no tokenizer beside the GGUF" in p for p in problems)


def test_missing_gguf_and_bad_magic_are_named(model_dir: Path):
    (model_dir / "fake.gguf").write_bytes(b"PK\x03\x04 not a gguf")
    problems = inspect_model_dir(str(model_dir), ["absent.gguf", "fake.gguf"]).problems
    assert f"GGUF file not found: {model_dir / 'absent.gguf'}" in problems
    assert f"not a GGUF file (bad magic): {model_dir / 'fake.gguf'}" in problems


def test_unreadable_config_is_named(model_dir: Path):
    (model_dir / "config.json").write_text("{not json")
    problems = inspect_model_dir(str(model_dir), [DEMO_GGUF]).problems
    assert any("config.json is not readable JSON" in p for p in problems)


def test_missing_split_parts():
    names = ["m-00001-of-00003.gguf", "m-00003-of-00003.gguf", "other.gguf"]
    assert missing_split_parts(names) == ["m-00002-of-00003.gguf"]
    assert missing_split_parts(["m-00001-of-00001.gguf"]) == []


def test_incomplete_split_set_fails(model_dir: Path):
    shard = "demo-00001-of-00002.gguf"
    shutil.copy(model_dir / DEMO_GGUF, model_dir / shard)
    problems = inspect_model_dir(str(model_dir), [shard]).problems
    assert problems == ["split set incomplete, missing demo-00002-of-00002.gguf"]


@pytest.mark.skipif(not GLM5_REFERENCE_DIR.is_dir(), reason="../shared/glm5-reference not present")
def test_glm5_reference_split_set_reads_as_glm_dsa():
    shards = sorted(p.name for p in GLM5_REFERENCE_DIR.glob("tiny-glm5-F32-*-of-*.gguf"))
    assert len(shards) == 3
    report = inspect_model_dir(str(GLM5_REFERENCE_DIR), shards)
    # Only the first shard carries general.architecture; the others hold split.* keys only.
    assert report.architecture == "glm-dsa"
    assert [f.architecture for f in report.gguf_files] == ["glm-dsa", None, None]
    # The reference keeps config and tokenizer in hf/, so both are reported missing here.
    assert [p for p in report.problems if "split set" in p] == []
    assert any("config.json not found" in p for p in report.problems)
