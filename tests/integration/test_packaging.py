"""The checkout as users install it: `pip install .` into a fresh venv gives a working `vllm-fleet`
and, beside it, the collection vllm_fleet.fleet that Ansible finds in site-packages. (The e2e
tests' first deploy runs from the collection built by ansible-galaxy and installed elsewhere.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

GLM5_CONFIG = REPO_ROOT / "tests" / "fixtures" / "planner" / "glm5-config.json"


def source_tree(dest: Path) -> Path:
    """The checkout's files as git knows them (tracked and new, not ignored): a build leaves no
    build/ or egg-info behind in the checkout."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, check=True,
                            capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new venv with `pip install .` of the checkout. Its dependencies are the controller venv's
    (a .pth file adds that site-packages after its own), so pip resolves them offline; the build
    runs without isolation on the controller's setuptools."""
    root = tmp_path_factory.mktemp("pip")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "controller-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    source = source_tree(root / "src")
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-build-isolation",
                           "--disable-pip-version-check", "-q", str(source)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


def test_pip_install_gives_the_cli_and_the_collection_beside_it(fresh_venv: Path):
    python = str(fresh_venv / "bin" / "python")
    located = subprocess.run([python, "-c", "from vllm_fleet import cli; print(cli.REPO)"], check=True,
                             capture_output=True, text=True, cwd="/").stdout.strip()
    # The CLI runs the playbooks of the collection pip installed, not the checkout's.
    assert located.startswith(str(fresh_venv)) and located.endswith("ansible_collections/vllm_fleet/fleet"), located
    for needed in ("playbooks/site.yml", "playbooks/rolling_restart.yml", "roles/vllm_service/tasks/main.yml",
                   "plugins/modules/vllm_release.py", "files/triage/rules.json", "meta/runtime.yml", "ansible.cfg"):
        assert (Path(located) / needed).is_file(), needed
    found = subprocess.run([str(fresh_venv / "bin" / "vllm-fleet"), "plan", "--config", str(GLM5_CONFIG),
                            "--quant", "Q4_K", "--gpus", "8", "--gpu-memory-gib", "96", "--tp", "8",
                            "--max-model-len", "8192", "--json", str(fresh_venv / "plan.json")],
                           capture_output=True, text=True, cwd="/", check=False)
    assert found.returncode == 0, found.stdout[-3000:] + found.stderr[-3000:]
    plan = json.loads((fresh_venv / "plan.json").read_text())
    assert plan["weight_bytes"] > 300e9 and plan["kv_cache_tokens"] > 8192, plan
