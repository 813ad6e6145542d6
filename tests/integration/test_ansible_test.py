"""ansible-test on the collection as built and installed (`ansible-galaxy collection build`, then
`install`): its units (this suite's tests/unit, run by ansible-test's own pytest configuration) and
every sanity test, on the controller's Python. The sanity tests that run in a venv of their own
(validate-modules, pylint, pep8, yamllint, import, ansible-doc, runtime-metadata, pslint, ...)
bootstrap it with a get-pip script that ansible-test downloads from a host CI cannot reach:
tests/harness/get_pip.py places a stand-in in its cache first. shellcheck is a Debian package
(tools/bootstrap.sh installs it); without it ansible-test skips that test, which this test counts
as a failure. Known exceptions are in tests/sanity/ignore-2.21.txt, each with its reason: the
modules' Apache-2.0 licence, scripts run directly (shebang), logs kept as captured, and the
benchmarks/gpu scripts. The HTTP layer (vllm_http, model_download) stays stdlib urllib (with an
explicit opener) because it also runs where Ansible is not installed (tools/vllm_bench.py on the
GPU machine)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import REPO_ROOT, ansible_env
from tests.harness import collection, get_pip

# Minutes, and the same tests as tests/unit: left out of run-tests.sh --quick, which runs those directly.
pytestmark = pytest.mark.slow

# Some of the tests `ansible-test sanity` runs: those with a venv of their own, and shellcheck. A test
# whose set-up is missing is skipped with a warning, and the run still passes: the warnings are checked.
EXPECTED = ["compile", "import", "pep8", "pylint", "shellcheck", "validate-modules", "yamllint", "ansible-doc"]


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    get_pip.place()  # before any sanity venv is made: ansible-test would download get-pip
    # Outside the checkout: inside a git work tree, ansible-test lists the collection's files with
    # git, and the checkout's .cache (pytest's basetemp in run-tests.sh) is ignored there.
    with tempfile.TemporaryDirectory(prefix="vllm-fleet-ansible-test-") as scratch:
        yield collection.installed_root(collection.install(Path(scratch)))


def ansible_test(root: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = ansible_env()
    # the units copy has no .cache: the monitoring rule tests find the checkout's promtool on PATH
    env["PATH"] = f"{REPO_ROOT / '.cache' / 'tools'}:{env['PATH']}"
    return subprocess.run(["ansible-test", *args, "--python", "3.12"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_sanity(installed: Path):
    # Every sanity test; the first run also builds the venvs (ansible-test keeps them in ~/.ansible/test).
    done = ansible_test(installed, "sanity", timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    output = done.stdout + done.stderr
    ran = [name for name in EXPECTED if f'Running sanity test "{name}"' in done.stdout]
    assert ran == EXPECTED, output[-3000:]
    skipped = [line for line in output.splitlines() if "Skipping sanity test" in line or "Required program" in line]
    assert not skipped, skipped


def test_units(installed: Path):
    done = ansible_test(installed, "units", "--num-workers", "1")
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-3000:]
