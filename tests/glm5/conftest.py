"""A test host of its own for GLM-5 in llama.cpp's GGUF layout, started from the golden image (venv
and demo model converged), so these tests run beside the e2e host's in a lane of their own."""

from __future__ import annotations

import os
import shutil
from typing import Iterator

import pytest

from tests.conftest import ansible_env
from tests.harness import golden
from tests.harness.hosts import TestHost
from tests.harness.fleet_testbed import testhost

GLM5 = TestHost(os.environ.get("VLLM_FLEET_GLM5_HOST", "vllm-fleet-glm5"),
                int(os.environ.get("VLLM_FLEET_GLM5_SSH_PORT", "2224")),
                int(os.environ.get("VLLM_FLEET_GLM5_API_PORT", "8002")))


@pytest.fixture(scope="package")
def glm5_host() -> Iterator[TestHost]:
    os.environ["PATH"] = ansible_env()["PATH"]
    image = golden.ensure()
    testhost("down", GLM5.name)
    shutil.rmtree(GLM5.results_dir, ignore_errors=True)
    testhost("up", GLM5.name, str(GLM5.ssh_port), str(GLM5.api_port), image=image)
    yield GLM5
    testhost("down", GLM5.name)
