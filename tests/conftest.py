from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL_DIR = REPO_ROOT / "files" / "models" / "demo-qwen3"
SHARED_DIR = REPO_ROOT.parent / "shared"
GLM5_REFERENCE_DIR = SHARED_DIR / "glm5-reference"


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


def ansible_env(**extra: str) -> dict[str, str]:
    """Environment for ansible commands run from the repository root (ansible.cfg applies)."""
    env = dict(os.environ)
    env["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.update(extra)
    return env


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO_ROOT, env=ansible_env(), capture_output=True, text=True, **kwargs)
