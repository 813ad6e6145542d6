"""The nvidia_driver molecule scenario (Debian 12 and 13): check -> converge -> idempotence -> verify
against a signed stand-in of NVIDIA's apt repository, built here and served over real HTTP."""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import threading

import pytest

from tests.conftest import REPO_ROOT, assert_molecule_scenario_passes
from tests.harness.make_nvidia_standin_repo import build

# 0: a free port picked by the kernel (a fixed one collided with a test host's published SSH port).
PORT = int(os.environ.get("VLLM_FLEET_NVIDIA_REPO_PORT", "0"))


@pytest.fixture
def standin_repo(tmp_path):
    repo = build(tmp_path / "repo", kernel=os.uname().release, gnupg_home=tmp_path / "gnupg")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(repo))
    # Reachable from the podman containers through host.containers.internal.
    server = http.server.ThreadingHTTPServer(("0.0.0.0", PORT), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield repo, server.server_address[1]
    server.shutdown()


def test_standin_repo_is_signed_and_complete(standin_repo):
    standin_repo, _port = standin_repo
    packages = (standin_repo / "Packages").read_text()
    for name in ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms", "nvidia-driver-cuda", "nvidia-persistenced",
                 "nvidia-fabricmanager", "nvidia-driver-pinning-580", "cuda-toolkit-13-0", f"linux-headers-{os.uname().release}"):
        assert f"Package: {name}\n" in packages
    verify = subprocess.run(["gpgv", "--keyring", str(standin_repo / "cuda-archive-keyring.gpg"),
                             str(standin_repo / "InRelease")], capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stderr


@pytest.mark.slow
def test_molecule_nvidia_driver_scenario(standin_repo):
    _repo, port = standin_repo
    image = subprocess.run(["tools/testhost.sh", "image"], cwd=REPO_ROOT, capture_output=True, text=True,
                           env={**os.environ, "VLLM_FLEET_TESTHOST_SUITE": "trixie"}, check=False)
    assert image.returncode == 0, image.stderr
    played = assert_molecule_scenario_passes("nvidia_driver",
                                             VLLM_FLEET_NVIDIA_REPO_URL=f"http://host.containers.internal:{port}/")
    # The side effect rebooted both hosts through gpu_host.yml, one batch each, and checked it.
    batches = [[line for line in section.splitlines() if line.startswith("changed: [")]
               for section in task_sections(played, "nvidia_driver : Reboot into the installed driver")]
    # One host per batch, both hosts; the batches' order is the order group_by added them in.
    assert sorted(batches) == [["changed: [vllm-fleet-h7-bookworm]"], ["changed: [vllm-fleet-h7-trixie]"]], batches
    assert len(task_sections(played, "Check no two hosts were down at once")) == 1


def task_sections(played: str, task: str) -> list[str]:
    """The output of each run of a task in an ansible-playbook log."""
    return [chunk.split("\n", 1)[-1] for chunk in played.split("TASK [")[1:] if chunk.startswith(task + "]")]
