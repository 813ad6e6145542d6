"""One fresh systemd test host for the end-to-end tests, deployed once by site.yml."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import ansible_runner
import pytest

from tests.conftest import DEMO_MODEL_DIR, REPO_ROOT, ansible_env
from tests.harness import golden, timings
from tools.fleet_testbed import testhost

# Overridable so that several checkouts can run their end-to-end tests side by side.
HOST = os.environ.get("VLLM_FLEET_E2E_HOST", "vllm-fleet-e2e")
SSH_PORT = int(os.environ.get("VLLM_FLEET_E2E_SSH_PORT", "2223"))
API_PORT = int(os.environ.get("VLLM_FLEET_E2E_API_PORT", "8001"))
API_URL = f"http://127.0.0.1:{API_PORT}/v1"
# The e2e host serves behind an API key, as a production one does (every run below passes it).
API_KEY = "e2e-test-key"
# The verify role's JSON lines history for this session's runs (one file per host).
RESULTS_DIR = REPO_ROOT / ".cache" / f"results-{HOST}"
DEMO_PROFILE = {
    "name": "demo-qwen3",
    "served_name": "demo",
    "source_dir": str(DEMO_MODEL_DIR),
    "gguf_files": ["demo-qwen3-F32.gguf"],
    "max_model_len": 2048,
    "tensor_parallel_size": 1,
    "dtype": "float32",  # as inventory/local serves it
}


@dataclass
class PlayRun:
    rc: int
    changed: int
    failed: bool
    output: str
    seconds: float
    events: list[dict] = field(default_factory=list)

    def task_result(self, task: str) -> dict:
        """The module result of the last run of a task, ok or failed."""
        for event in reversed(self.events):
            data = event.get("event_data", {})
            if data.get("task") == task and event.get("event") in ("runner_on_ok", "runner_on_failed"):
                return data.get("res", {})
        raise KeyError(f"task {task!r} did not run")

    def failed_result(self, task: str) -> dict:
        """The module result of the last failed run of a task (a rollback may run it again, ok)."""
        for event in reversed(self.events):
            data = event.get("event_data", {})
            if data.get("task") == task and event.get("event") == "runner_on_failed":
                return data.get("res", {})
        raise KeyError(f"task {task!r} did not fail")


# For a site.yml run whose change is the service's alone (its arguments, its release state): the
# other roles would only confirm the first deploy's state, which test_site's second run proves.
SERVICE_ONLY = "--skip-tags python_env,vllm,model,verify"


def on_host(command: str, check: bool = True) -> str:
    result = subprocess.run(["podman", "exec", HOST, "sh", "-c", command], check=check, capture_output=True, text=True)
    return result.stdout.strip()


def run_playbook(workdir: Path, playbook: str = "site.yml", cmdline: str = "", **extravars) -> PlayRun:
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = ansible_runner.run(
        private_data_dir=str(workdir),
        project_dir=str(REPO_ROOT),
        playbook=str(REPO_ROOT / playbook),
        inventory=str(REPO_ROOT / "inventory" / "local"),
        extravars={"vllm_service_api_key": API_KEY, **extravars},
        envvars={"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                 "VLLM_FLEET_LOCAL_SSH_PORT": str(SSH_PORT), "VLLM_FLEET_LOCAL_API_PORT": str(API_PORT),
                 "VLLM_FLEET_RESULTS_DIR": str(RESULTS_DIR)},
        cmdline=cmdline or None,
        quiet=True,
    )
    stats = result.stats or {}
    events = list(result.events)
    seconds = time.perf_counter() - started
    timings.record_play(playbook, events, seconds)
    return PlayRun(
        rc=result.rc,
        changed=sum(stats.get("changed", {}).values()),
        failed=bool(stats.get("failures") or stats.get("dark")),
        output=result.stdout.read(),
        seconds=seconds,
        events=events,
    )


def service_state() -> tuple[str, str]:
    props = dict(line.split("=", 1) for line in on_host("systemctl show vllm --property=ActiveState,MainPID").splitlines())
    return props["ActiveState"], props["MainPID"]


# Package scope: the host goes once the e2e tests are done, not at the end of the whole run
# (an idle CPU vLLM holds gigabytes the fleet and molecule hosts need).
@pytest.fixture(scope="package", autouse=True)
def fresh_host() -> Iterator[None]:
    os.environ["PATH"] = ansible_env()["PATH"]
    testhost("down", HOST)
    shutil.rmtree(RESULTS_DIR, ignore_errors=True)
    try:
        testhost("up", HOST, str(SSH_PORT), str(API_PORT))
    except BaseException:
        golden.capture_settled()  # no first deploy will capture the golden image
        raise
    yield
    testhost("down", HOST)


# The one deploy from a bare host. Its converged host becomes the golden image that molecule and
# the fleet start from (tests/harness/golden.py).
@pytest.fixture(scope="package")
def first_run(tmp_path_factory) -> PlayRun:
    try:
        run = run_playbook(tmp_path_factory.mktemp("run1"))
        if run.rc == 0:
            try:
                golden.capture(HOST)
            except (RuntimeError, OSError) as error:  # later users build it from a bare host instead
                warnings.warn(f"golden image not captured from {HOST}: {error}", stacklevel=1)
    finally:
        golden.capture_settled()
    return run


@pytest.fixture
def deployed(first_run: PlayRun) -> PlayRun:
    assert first_run.rc == 0, first_run.output[-6000:]
    return first_run


GLM5_MODULE = "tests/e2e/test_glm5.py"
FIRST_MODULE = "tests/e2e/test_molecule_on_deployed_host.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The molecule scenario that checks the first deploy's host runs first among the e2e tests (it
    checks the host as that deploy left it), the GLM-5 module last: it leaves the host on a GLM-5
    release, and any e2e test after it would first need the demo model deployed again (about 3
    minutes)."""
    e2e = [i for i, item in enumerate(items) if item.nodeid.startswith("tests/e2e/")]
    if not e2e:
        return
    block = items[e2e[0]:e2e[-1] + 1]
    first = [item for item in block if item.nodeid.startswith(FIRST_MODULE)]
    last = [item for item in block if item.nodeid.startswith(GLM5_MODULE)]
    rest = [item for item in block if item not in first and item not in last]
    items[e2e[0]:e2e[-1] + 1] = first + rest + last


def e2e_tests_after(request: pytest.FixtureRequest, module: str) -> bool:
    """Whether an e2e test of another module runs after this module's tests in this session."""
    items = request.session.items
    last = max(i for i, item in enumerate(items) if item.nodeid.startswith(module))
    return any(item.nodeid.startswith("tests/e2e/") for item in items[last + 1:])
