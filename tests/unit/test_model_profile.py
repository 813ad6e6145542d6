from __future__ import annotations

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gguf_files import ShardHeader, split_set_problems
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_profile import plain_name_problem, profile_problems, url_file_name, url_problems

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


def test_a_presigned_url_without_a_name_names_its_file_by_the_path_alone():
    urls = [{"url": f"https://bucket.example/models/{n}?X-Amz-Signature=abc%2Fdef&X-Amz-Expires=3600", "sha256": SHA}
            for n in SHARDS]
    assert [url_file_name(entry) for entry in urls] == SHARDS
    assert profile_problems("url", SHARDS, {"urls": urls}, urls) == []


def test_names_that_are_not_one_path_component_are_refused_before_any_change():
    bad = ["../../etc/passwd", "/var/lib/other/model.gguf", "sub/m.gguf", "..", ""]
    for name in bad:
        if not name:  # an empty name in urls means "take it from the URL"
            assert plain_name_problem("gguf_files entry", name)
            continue
        assert plain_name_problem("gguf_files entry", name), name
        urls = [{"url": "https://mirror/x.gguf", "name": name, "sha256": SHA}]
        assert any(p.startswith("urls[0] name") for p in url_problems(urls, [])), name
    problems = profile_problems("local", ["../m.gguf"], {"local_dir": "/nfs/m"}, [])
    assert problems == ["gguf_files entry '../m.gguf' is not a plain file name (one path component: no '/', "
                        "not '.' or '..')"]
    assert plain_name_problem("gguf_files entry", "GLM-5-Q4_K_M-00001-of-00009.gguf") is None
