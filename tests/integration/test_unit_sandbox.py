"""The vllm unit's sandbox as systemd scores it: the role's template rendered by Ansible for the cpu
and the cuda profile, then `systemd-analyze security --offline=true` on each render. The e2e and
fleet tests serve from the same unit, sandbox on."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import run

TEMPLATE = "roles/vllm_service/templates/vllm.service.j2"
EXPOSURE = re.compile(r"Overall exposure level for \S+: (\d+\.\d+) ")
# What the template needs beyond the role's defaults and vars (set by other roles).
FACTS = {"vllm_service_served_model_name": "demo"}
MAX_EXPOSURE = 3.0

pytestmark = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")


def render(profile: str, dest: Path) -> str:
    done = run(["ansible", "localhost", "-c", "local", "-m", "ansible.builtin.template",
                "-a", json.dumps({"src": TEMPLATE, "dest": str(dest)}),
                "-e", "@roles/vllm_service/defaults/main.yml", "-e", "@roles/vllm_service/vars/main.yml",
                "-e", json.dumps({**FACTS, "fleet_accelerator": profile})])
    assert done.returncode == 0, done.stdout + done.stderr
    return dest.read_text()


def exposure(unit: Path) -> tuple[float, str]:
    done = run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)])
    found = EXPOSURE.search(done.stdout)
    assert found, done.stdout + done.stderr
    return float(found.group(1)), done.stdout


def directives(unit_text: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in unit_text.splitlines() if line.startswith(f"{key}=")]


@pytest.mark.parametrize("profile", ["cpu", "cuda"])
def test_unit_exposure_is_at_most_3(profile: str, tmp_path: Path):
    unit = tmp_path / "vllm.service"
    text = render(profile, unit)
    score, report = exposure(unit)
    print(f"\n[{profile}] systemd-analyze security --offline=true: exposure {score}")
    assert score <= MAX_EXPOSURE, report
    assert directives(text, "DevicePolicy") == ["closed"]
    assert directives(text, "CapabilityBoundingSet") == [""]
    # JIT code generation (oneDNN on CPU, Triton/CUDA on GPU) needs writable executable memory.
    assert directives(text, "MemoryDenyWriteExecute") == []


def test_only_the_cuda_unit_opens_the_nvidia_devices(tmp_path: Path):
    cpu = render("cpu", tmp_path / "cpu.service")
    cuda = render("cuda", tmp_path / "cuda.service")
    assert directives(cpu, "DeviceAllow") == []
    assert directives(cuda, "DeviceAllow") == ["char-nvidia-frontend rw", "char-nvidiactl rw",
                                               "char-nvidia-uvm rw", "char-nvidia-caps rw"]
