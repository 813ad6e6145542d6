from __future__ import annotations

from module_utils.gguf_files import ShardHeader, split_set_problems
from module_utils.model_profile import profile_problems

SHARDS = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
SHA = "a" * 64


def test_a_complete_url_profile_passes():
    urls = [{"url": f"https://mirror/{n}", "sha256": SHA} for n in SHARDS]
    assert profile_problems("url", SHARDS, {"urls": urls}, urls) == []


def test_url_profile_problems_are_named():
    urls = [{"url": "https://mirror/m-00001-of-00002.gguf", "sha256": "abc"}, {"sha256": SHA, "name": "config.json"}]
    problems = profile_problems("url", SHARDS, {"urls": urls}, urls)
    assert "urls[0] (m-00001-of-00002.gguf): sha256 missing or not 64 hex digits; " \
           "every downloaded file is verified against it" in problems
    assert "urls[1] has no url" in problems
    assert "gguf file m-00002-of-00002.gguf has no entry in urls" in problems


def test_each_source_needs_its_key_and_a_complete_shard_list():
    assert profile_problems("hf", SHARDS[:1], {"hf.repo": ""}, []) == [
        "source hf needs hf.repo in the model profile",
        "gguf_files is not a complete split set: m-00002-of-00002.gguf is missing"]
    assert profile_problems("local", SHARDS, {"local_dir": "/nfs/m"}, []) == []
    assert profile_problems("s3", SHARDS, {}, []) == ["source 's3' is not one of controller, url, hf, local"]


def header(name: str, no: int, count: int = 2, tensors: list[str] | None = None, total: int = 2, arch="qwen3"):
    return ShardHeader(name, arch if no == 0 else None, no, count, total, tensors or [f"t{no}"])


def test_a_consistent_split_set_has_no_problems():
    headers = [header(SHARDS[0], 0), header(SHARDS[1], 1)]
    assert split_set_problems(headers, "qwen3", 2) == []


def test_split_header_and_name_disagreements_are_named():
    headers = [header(SHARDS[0], 0), header(SHARDS[1], 0, tensors=["t1"])]
    assert split_set_problems(headers) == [
        "m-00002-of-00002.gguf: split.no=0 split.count=2 in its header, expected split.no=1 split.count=2"]
    swapped = [header(SHARDS[1], 0), header(SHARDS[0], 1)]
    assert any("is shard 2 of 2 by name, but position 1 of 2" in p for p in split_set_problems(swapped))


def test_tensor_counts_and_architecture_are_checked():
    headers = [header(SHARDS[0], 0, total=3), header(SHARDS[1], 1, total=3)]
    assert split_set_problems(headers, "glm-dsa", 3) == [
        "the shards hold 2 tensors, split.tensors.count says 3",
        "the set holds 2 tensors, the model profile expects 3",
        "m-00001-of-00002.gguf: architecture qwen3, the model profile expects glm-dsa"]
