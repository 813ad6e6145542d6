"""One fresh systemd test host for the end-to-end tests, deployed once by site.yml."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.conftest import DEMO_MODEL_DIR, ansible_env
from tests.harness import collection, golden
from tests.harness.hosts import API_KEY, PlayRun, TestHost  # noqa: F401 (the e2e modules import them from here)
from tests.harness.fleet_testbed import testhost

# Overridable so that several checkouts can run their end-to-end tests side by side.
E2E = TestHost(os.environ.get("VLLM_FLEET_E2E_HOST", "vllm-fleet-e2e"),
               int(os.environ.get("VLLM_FLEET_E2E_SSH_PORT", "2223")),
               int(os.environ.get("VLLM_FLEET_E2E_API_PORT", "8001")))
HOST, SSH_PORT, API_PORT, API_URL, RESULTS_DIR = E2E.name, E2E.ssh_port, E2E.api_port, E2E.api_url, E2E.results_dir
on_host, run_playbook, service_state = E2E.on_host, E2E.run_playbook, E2E.service_state
DEMO_PROFILE = {
    "name": "demo-qwen3",
    "served_name": "demo",
    "source_dir": str(DEMO_MODEL_DIR),
    "gguf_files": ["demo-qwen3-F32.gguf"],
    "max_model_len": 2048,
    "tensor_parallel_size": 1,
    "dtype": "float32",  # as inventory/local serves it
}

# For a site.yml run whose change is the service's alone (its arguments, its release state): the
# other roles would only confirm the first deploy's state, which test_site's second run proves.
SERVICE_ONLY = "--skip-tags python_env,vllm,model,monitoring,verify"


def prometheus_query(expr: str) -> list[dict]:
    """An instant query to the Prometheus that site.yml put on the test host (group monitoring)."""
    script = ("import json, sys, urllib.parse, urllib.request; "
              "url = 'http://127.0.0.1:9090/api/v1/query?' + urllib.parse.urlencode({'query': sys.argv[1]}); "
              "print(json.dumps(json.load(urllib.request.urlopen(url, timeout=10))['data']['result']))")
    return json.loads(on_host(f"python3 -c {shlex.quote(script)} {shlex.quote(expr)}"))


def wait_for_series(expr: str, timeout: float, ready: Callable[[list[dict]], bool] = bool) -> tuple[list[dict], float]:
    """Poll a query until `ready(result)`; the result and the seconds it took (fails past the timeout)."""
    started = time.monotonic()
    while True:
        result = prometheus_query(expr)
        if ready(result):
            return result, time.monotonic() - started
        if time.monotonic() - started > timeout:
            pytest.fail(f"{expr!r}: not ready after {timeout:.0f} s, last result {result}")
        time.sleep(1)


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


@pytest.fixture(scope="package")
def installed_collection(tmp_path_factory) -> Path:
    """The checkout built and installed as a collection, as an operator installs it."""
    return collection.install(tmp_path_factory.mktemp("collection"))


class BackgroundCapture:
    """The golden image captured from the e2e host in a thread, so that the tests that leave the
    host as the first deploy left it (the vllm_service scenario asserts it) run meanwhile; every
    other test waits for it (the `deployed` fixture) before it changes the host."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def start(self, host: str) -> None:
        self._thread = threading.Thread(target=self._capture, args=(host,), daemon=True)
        self._thread.start()

    @staticmethod
    def _capture(host: str) -> None:
        try:
            golden.capture(host)
        except (RuntimeError, OSError) as error:  # later users build it from a bare host instead
            warnings.warn(f"golden image not captured from {host}: {error}", stacklevel=1)
        finally:
            golden.capture_settled()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()


# The one deploy from a bare host, by the installed collection's vllm_fleet.fleet.site (the
# checkout's site.yml runs second and must find nothing to change). Its converged host becomes the
# golden image that molecule and the fleet start from (tests/harness/golden.py).
@pytest.fixture(scope="package")
def golden_capture() -> Iterator[BackgroundCapture]:
    capture = BackgroundCapture()
    yield capture
    capture.wait()


@pytest.fixture(scope="package")
def first_run(installed_collection: Path, tmp_path_factory, golden_capture: BackgroundCapture) -> PlayRun:
    try:
        run = run_playbook(tmp_path_factory.mktemp("run1"), installed=installed_collection)
    except BaseException:
        golden.capture_settled()
        raise
    if run.rc == 0:
        golden_capture.start(HOST)
    else:
        golden.capture_settled()
    return run


@pytest.fixture
def deployed_unchanged(first_run: PlayRun) -> PlayRun:
    """The first deploy's host, for a test that must leave it as it is: it may run while the golden
    image is captured from it."""
    assert first_run.rc == 0, first_run.output[-6000:]
    return first_run


@pytest.fixture
def deployed(first_run: PlayRun, golden_capture: BackgroundCapture) -> PlayRun:
    golden_capture.wait()
    assert first_run.rc == 0, first_run.output[-6000:]
    return first_run


FIRST_MODULE = "tests/e2e/test_molecule_on_deployed_host.py"
SECOND_RUN = "tests/e2e/test_site.py::test_second_run_reports_no_change"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The molecule scenario that checks the first deploy's host runs first among the e2e tests (it
    checks the host as that deploy left it)."""
    e2e = [i for i, item in enumerate(items) if item.nodeid.startswith("tests/e2e/")]
    if not e2e:
        return
    block = items[e2e[0]:e2e[-1] + 1]
    first = [item for item in block if item.nodeid.startswith(FIRST_MODULE)]
    # "a second site.yml changes nothing" is about the first deploy's state: before the reboot test
    # gives the host a new address (which a later site.yml rightly writes into Prometheus's targets)
    first += [item for item in block if item.nodeid.startswith(SECOND_RUN)]
    items[e2e[0]:e2e[-1] + 1] = first + [item for item in block if item not in first]
