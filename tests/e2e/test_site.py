"""site.yml end to end against a fresh systemd test host: deploy, verify, run again with no
change, talk to the service from the controller, and refuse bad input before any change."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import ansible_runner
import pytest
from openai import OpenAI

from tests.conftest import DEMO_MODEL_DIR, REPO_ROOT, ansible_env

pytestmark = pytest.mark.slow

HOST = "vllm-fleet-e2e"
SSH_PORT = 2223
API_PORT = 8001
API_URL = f"http://127.0.0.1:{API_PORT}/v1"
DEMO_PROFILE = {
    "name": "demo-qwen3",
    "served_name": "demo",
    "source_dir": str(DEMO_MODEL_DIR),
    "gguf_files": ["demo-qwen3-F32.gguf"],
    "max_model_len": 2048,
    "tensor_parallel_size": 1,
}


@dataclass
class PlayRun:
    rc: int
    changed: int
    failed: bool
    output: str


def testhost(*args: str) -> None:
    subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), *args], check=True)


def on_host(command: str) -> str:
    result = subprocess.run(["podman", "exec", HOST, "sh", "-c", command], check=True, capture_output=True, text=True)
    return result.stdout.strip()


def run_site(workdir: Path, **extravars) -> PlayRun:
    workdir.mkdir(parents=True, exist_ok=True)
    result = ansible_runner.run(
        private_data_dir=str(workdir),
        project_dir=str(REPO_ROOT),
        playbook=str(REPO_ROOT / "site.yml"),
        inventory=str(REPO_ROOT / "inventory" / "local"),
        extravars={"ansible_port": SSH_PORT, "verify_base_url": API_URL, **extravars},
        envvars={"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_FORCE_COLOR": "0"},
        quiet=True,
        cmdline="",
    )
    stats = result.stats or {}
    return PlayRun(
        rc=result.rc,
        changed=sum(stats.get("changed", {}).values()),
        failed=bool(stats.get("failures") or stats.get("dark")),
        output=result.stdout.read(),
    )


def service_state() -> tuple[str, str]:
    return on_host("systemctl show vllm --property=ActiveState --value"), on_host(
        "systemctl show vllm --property=MainPID --value")


@pytest.fixture(scope="module", autouse=True)
def fresh_host() -> Iterator[None]:
    testhost("down", HOST)
    testhost("up", HOST, str(SSH_PORT), str(API_PORT))
    os.environ["PATH"] = ansible_env()["PATH"]
    yield
    testhost("down", HOST)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> PlayRun:
    return run_site(tmp_path_factory.mktemp("run1"))


def test_first_run_deploys_and_verifies(first_run: PlayRun):
    assert first_run.rc == 0, first_run.output[-6000:]
    assert first_run.changed > 0
    assert f"demo at {API_URL} answered 2" in first_run.output.replace("\n        ", " ")
    assert "tok/s" in first_run.output
    assert service_state()[0] == "active"


def test_second_run_reports_no_change(first_run: PlayRun, tmp_path: Path):
    assert first_run.rc == 0
    second = run_site(tmp_path)
    assert second.rc == 0, second.output[-6000:]
    assert second.changed == 0, second.output


def test_openai_client_from_the_controller(first_run: PlayRun):
    assert first_run.rc == 0
    client = OpenAI(base_url=API_URL, api_key="EMPTY", timeout=60, max_retries=0)
    assert [m.id for m in client.models.list().data] == ["demo"]
    completion = client.completions.create(model="demo", prompt="The fleet is", max_tokens=16, temperature=0)
    assert completion.usage.completion_tokens > 0 and completion.choices[0].text
    chat = client.chat.completions.create(model="demo", messages=[{"role": "user", "content": "Hello"}], max_tokens=8)
    assert chat.usage.completion_tokens > 0


def test_missing_model_dir_stops_before_any_change(first_run: PlayRun, tmp_path: Path):
    assert first_run.rc == 0
    before = service_state()
    result = run_site(tmp_path / "run", fleet_model={**DEMO_PROFILE, "source_dir": "/nonexistent/model"})
    assert result.rc != 0 and result.failed
    assert "model source directory not found: /nonexistent/model" in result.output
    assert result.changed == 0
    assert service_state() == before


def test_gguf_without_tokenizer_stops_before_any_change(first_run: PlayRun, tmp_path: Path):
    assert first_run.rc == 0
    broken = tmp_path / "model"
    shutil.copytree(DEMO_MODEL_DIR, broken)
    (broken / "tokenizer.json").unlink()
    before = service_state()
    result = run_site(tmp_path / "run", fleet_model={**DEMO_PROFILE, "source_dir": str(broken)})
    assert result.rc != 0
    assert f"no tokenizer beside the GGUF: expected one of tokenizer.json, tokenizer.model in {broken}" in result.output
    assert result.changed == 0
    assert service_state() == before


def test_mistyped_variable_stops_before_any_change(first_run: PlayRun, tmp_path: Path):
    assert first_run.rc == 0
    before = service_state()
    result = run_site(tmp_path, vllm_service_port="eighty")
    assert result.rc != 0
    assert "vllm_service_port" in result.output
    assert result.changed == 0
    assert service_state() == before
