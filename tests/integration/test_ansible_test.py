"""ansible-test on the collection as built and installed (`ansible-galaxy collection build`, then
`install`): its units (this suite's tests/unit, run by ansible-test's own pytest configuration) and
the sanity tests that run on the controller's Python. The other sanity tests (validate-modules,
pylint, pep8, yamllint, import, ansible-doc, runtime-metadata, shellcheck, pslint) need
ansible-test's venv bootstrap, which downloads get-pip from a host CI cannot reach; `shebang`
admits only module shebangs, and the benchmarks and fixture generators are scripts by design;
`replace-urlopen` asks for Ansible's open_url, and the HTTP layer (vllm_http, model_download) is
stdlib urllib because it also runs where Ansible is not installed (tools/vllm_bench.py on the GPU
machine), and ansible-lint does not let that test be ignored. Known exceptions are in
tests/sanity/ignore-2.21.txt (logs kept as captured, with CRLF)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import ansible_env
from tests.harness import collection

# Minutes, and the same tests as tests/unit: left out of run-tests.sh --quick, which runs those directly.
pytestmark = pytest.mark.slow

SANITY = ["action-plugin-docs", "changelog", "compile", "empty-init", "ignores", "line-endings", "no-assert",
          "no-get-exception", "no-illegal-filenames", "no-smart-quotes", "symlinks",
          "use-argspec-type-path", "use-compat-six"]


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    # Outside the checkout: inside a git work tree, ansible-test lists the collection's files with
    # git, and the checkout's .cache (pytest's basetemp in run-tests.sh) is ignored there.
    with tempfile.TemporaryDirectory(prefix="vllm-fleet-ansible-test-") as scratch:
        yield collection.installed_root(collection.install(Path(scratch)))


def ansible_test(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-test", *args, "--python", "3.12"], cwd=root, env=ansible_env(),
                          capture_output=True, text=True, timeout=900)


def test_sanity(installed: Path):
    done = ansible_test(installed, "sanity", *(f"--test={name}" for name in SANITY))
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert all(f'Running sanity test "{name}"' in done.stdout for name in SANITY), done.stdout[-3000:]


def test_units(installed: Path):
    done = ansible_test(installed, "units", "--num-workers", "1")
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert " passed" in done.stdout and " failed" not in done.stdout, done.stdout[-3000:]
