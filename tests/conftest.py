from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

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


def run(cmd: list[str], check: bool = False, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO_ROOT, env=ansible_env(), capture_output=True, text=True, check=check, **kwargs)


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
MOLECULE_STEPS = ["check", "converge", "idempotence", "verify"]


def assert_molecule_scenario_passes(scenario: str, **extra_env: str) -> str:
    """`molecule test -s scenario`: its sequence has check -> converge -> idempotence -> verify, and
    molecule's closing summary says every action ran and succeeded. Returns the ansible-playbook
    output of every step, unwrapped (ansible's own log, not molecule's boxed rendering of it)."""
    config = yaml.safe_load((REPO_ROOT / "molecule" / scenario / "molecule.yml").read_text())
    sequence = config["scenario"]["test_sequence"]
    assert [step for step in sequence if step in MOLECULE_STEPS] == MOLECULE_STEPS
    with tempfile.TemporaryDirectory() as scratch:
        ansible_log = Path(scratch) / "ansible.log"
        result = subprocess.run(["molecule", "test", "-s", scenario], cwd=REPO_ROOT,
                                env=ansible_env(ANSIBLE_LOG_PATH=str(ansible_log), **extra_env),
                                capture_output=True, text=True, timeout=1800, check=False)
        played = ansible_log.read_text() if ansible_log.exists() else ""
    if os.environ.get("VLLM_FLEET_MOLECULE_LOG_DIR"):  # ansible's timestamped log, to see where a scenario's time goes
        keep = Path(os.environ["VLLM_FLEET_MOLECULE_LOG_DIR"])
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{scenario}.log").write_text(played)
    output = ANSI_ESCAPE.sub("", result.stdout + result.stderr)
    assert result.returncode == 0, output[-8000:]
    summary = re.search(rf"{scenario}\s+: actions=(\d+)\s+successful=(\d+)\s+.*failed=(\d+)", output)
    assert summary, output[-3000:]
    actions, successful, failed = map(int, summary.groups())
    assert actions == successful == len(sequence) and failed == 0, summary.group(0)
    return "\n".join(line.split("| ", 1)[-1] for line in played.splitlines())


TASK_HEADER = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(?:(\w+) : )?(.+?)\] \*+$")


def changed_role_tasks(output: str, roles: tuple[str, ...]) -> list[str]:
    """'role : task' for every task of these roles that ansible-playbook's output shows as changed."""
    changed, current = [], None
    for line in output.splitlines():
        header = TASK_HEADER.match(line)
        if header:
            current = f"{header.group(1)} : {header.group(2)}" if header.group(1) in roles else None
        elif line.startswith(("PLAY ", "PLAY RECAP")):
            current = None
        elif current and line.startswith("changed:") and current not in changed:
            changed.append(current)
    return changed


# Tests that start from the golden image that the e2e first deploy captures: after the others of
# their lane, so that in a parallel run (tools/run-tests.sh) the image is there when they begin.
GOLDEN_USERS = ("tests/integration/test_molecule.py", "tests/glm5/", "tests/fleet/")


def shadowing_collection_copies() -> list[Path]:
    """Copies of vllm_fleet.fleet in the collection paths Ansible searches before the controller
    venv's link to this checkout (tools/bootstrap.sh): each would run instead of the code under test."""
    configured = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "~/.ansible/collections:/usr/share/ansible/collections")
    copies = []
    for entry in filter(None, configured.split(":")):
        copy = Path(entry).expanduser() / "ansible_collections" / "vllm_fleet" / "fleet"
        if copy.exists() and copy.resolve() != REPO_ROOT.resolve():
            copies.append(copy)
    return copies


def pytest_configure(config: pytest.Config) -> None:
    # Here, not only in pyproject.toml: ansible-test units runs pytest with its own configuration.
    config.addinivalue_line("markers", "slow: needs podman test hosts and a CPU vLLM (minutes)")


def pytest_sessionstart(session: pytest.Session) -> None:
    copies = shadowing_collection_copies()
    if copies:
        pytest.exit(f"a copy of the collection vllm_fleet.fleet shadows this checkout: {', '.join(map(str, copies))}; "
                    "remove it (molecule's prerun installs one unless its scenario sets prerun: false)", returncode=4)


def starts_from_golden_image(nodeid: str) -> bool:
    return nodeid.startswith(GOLDEN_USERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: starts_from_golden_image(item.nodeid))  # stable: the rest keep their order
