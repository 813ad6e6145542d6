"""site.yml end to end against a fresh systemd test host: deploy, verify, run again with no
change, talk to the service from the controller, and refuse bad input before any change."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import openai
from openai import OpenAI

from tests.conftest import DEMO_MODEL_DIR
from tests.harness import collection, faults
from tests.e2e.conftest import API_KEY, API_URL, DEMO_PROFILE, PlayRun, on_host, run_playbook, service_state

pytestmark = pytest.mark.slow


def test_first_run_deploys_and_verifies(first_run: PlayRun, installed_collection: Path):
    assert first_run.rc == 0, first_run.output[-6000:]
    assert first_run.changed > 0
    # Deployed by the installed collection: every task it ran is a file of the installed copy.
    installed = str(collection.installed_root(installed_collection))
    task_paths = {event["event_data"]["task_path"].rsplit(":", 1)[0] for event in first_run.events
                  if event.get("event") == "runner_on_ok" and event["event_data"].get("task_path")}
    assert task_paths and all(path.startswith(installed) for path in task_paths), sorted(task_paths)[:5]
    verified = first_run.task_result("Benchmark the service and check its output from the controller")
    assert verified["server_version"] == "0.32.0"
    assert [case["ok"] for case in verified["coherence"]] == [True, True]
    assert verified["decode"]["tok_s_tpot"] > 0 and verified["levels"][0]["failed"] == 0
    print(f"\n[first run] {first_run.seconds:.0f} s, verify: {verified['summary']}")
    assert "coherence: 2/2 cases matched" in first_run.output
    assert service_state()[0] == "active"


def test_second_run_reports_no_change(deployed: PlayRun, tmp_path: Path):
    second = run_playbook(tmp_path)
    assert second.rc == 0, second.output[-6000:]
    assert second.changed == 0, second.output


def test_openai_client_from_the_controller(deployed: PlayRun):
    client = OpenAI(base_url=API_URL, api_key=API_KEY, timeout=60, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["demo"]
    completion = client.completions.create(model="demo", prompt="The fleet is", max_tokens=16, temperature=0)
    assert completion.usage.completion_tokens > 0 and completion.choices[0].text
    chat = client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Hello"}], max_tokens=8)
    assert chat.usage.completion_tokens > 0
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=API_URL, api_key="not-the-key", timeout=60, max_retries=0).models.list()


def test_missing_model_dir_stops_before_any_change(deployed: PlayRun, tmp_path: Path):
    before = service_state()
    result = run_playbook(tmp_path / "run", fleet_model={**DEMO_PROFILE, "source_dir": "/nonexistent/model"})
    assert result.rc != 0 and result.failed
    assert "model source directory not found: /nonexistent/model" in result.output
    assert result.changed == 0
    assert service_state() == before


def test_gguf_without_tokenizer_stops_before_any_change(deployed: PlayRun, tmp_path: Path):
    broken = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, broken)
    (broken / "tokenizer.json").unlink()
    before = service_state()
    result = run_playbook(tmp_path / "run", fleet_model={**DEMO_PROFILE, "source_dir": str(broken)})
    assert result.rc != 0
    assert f"no tokenizer beside the GGUF: expected one of tokenizer.json, tokenizer.model in {broken}" in result.output
    assert result.changed == 0
    assert service_state() == before


def test_mistyped_variable_stops_before_any_change(deployed: PlayRun, tmp_path: Path):
    before = service_state()
    result = run_playbook(tmp_path, vllm_service_port="eighty")
    assert result.rc != 0
    assert "vllm_service_port" in result.output
    assert result.changed == 0
    assert service_state() == before


def test_the_example_placeholder_api_key_stops_before_any_change(deployed: PlayRun, tmp_path: Path):
    before = service_state()
    result = run_playbook(tmp_path, vllm_service_api_key="change-me-with-ansible-vault")
    assert result.rc != 0
    assert "vllm_service_api_key is the example inventory's placeholder" in result.output
    assert "change-me-with-ansible-vault" not in result.output
    assert result.changed == 0
    assert service_state() == before


def test_settings_out_of_range_stop_before_any_change(deployed: PlayRun, tmp_path: Path):
    before = service_state()
    result = run_playbook(tmp_path, vllm_service_gpu_memory_utilization=1.5, vllm_service_releases_keep=0)
    assert result.rc != 0
    assert "vllm_service_gpu_memory_utilization=1.5 is above its range (at most 1)" in result.output
    assert "vllm_service_releases_keep=0 is below its range (at least 1)" in result.output
    assert result.changed == 0
    assert service_state() == before
    faults.record("bad_input", survived="refused before any change", seconds=result.seconds,
                  message="vllm_service_gpu_memory_utilization=1.5 is above its range (at most 1); "
                          "vllm_service_releases_keep=0 is below its range (at least 1)")


@pytest.mark.parametrize(("user", "named"), [
    ("root", "vllm_service_user is root"),
    # dbus's account on the test host: a system account the role did not make.
    ("messagebus", "vllm_service_user messagebus has home /nonexistent, not vllm_service_home /var/lib/vllm"),
])
def test_service_user_the_role_did_not_create_stops_before_any_change(deployed: PlayRun, tmp_path: Path,
                                                                      user: str, named: str):
    before = service_state()
    result = run_playbook(tmp_path, vllm_service_user=user)
    assert result.rc != 0
    output = " ".join(result.output.split())  # the YAML callback folds long messages
    assert named in output and "The cleanup before every start stops the service user" in output
    assert result.changed == 0
    assert service_state() == before


def test_preflight_stops_a_host_without_room_before_any_change(deployed: PlayRun, tmp_path: Path):
    """Another account fills /dev/shm and the model set (a sparse 4 TiB GGUF on the controller) is larger
    than the host's disk: site.yml stops in its first play, the preflight, naming both with their
    figures; no later play starts and nothing changes."""
    model = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, model)
    os.truncate(model / "demo-qwen3-F32.gguf", 4 * 2**40)
    room = int(on_host("df --output=avail --block-size=1M /dev/shm | tail -n 1"))
    on_host(f"fallocate -l {room - 100}M /dev/shm/other-team-buffer && chown nobody /dev/shm/other-team-buffer")
    try:
        before = service_state()
        result = run_playbook(tmp_path / "run", fleet_model={**DEMO_PROFILE, "source_dir": str(model)})
    finally:
        on_host("rm -f /dev/shm/other-team-buffer", check=False)
    assert result.rc != 0
    message = " ".join(result.task_result("Stop a no-go host before any change")["msg"].split())
    print(f"\n[preflight no-go] {result.seconds:.1f} s: {message}")
    assert message.startswith("preflight no-go on vllm-fleet-local: /dev/shm has ")
    assert "/dev/shm/other-team-buffer (nobody, " in message and "it needs at least 512 MiB" in message
    assert "the model set needs 4097.00 GiB (with the margin) on /var/lib/vllm-fleet/models" in message
    assert message.endswith("Nothing was changed.")
    plays = {event["event_data"]["play"] for event in result.events if event.get("event") == "playbook_on_play_start"}
    assert plays == {"Preflight the vLLM and GPU hosts"}
    assert result.changed == 0
    assert service_state() == before
    faults.record("preflight_no_room", survived="refused before any change", seconds=result.seconds, message=message)
