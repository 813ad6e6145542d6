"""The preflight's readings and judgements (plugins/module_utils/preflight.py) on recorded real
outputs and on this machine's own /proc and filesystems."""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils import preflight
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gpu_leftovers import read_cgroup, systemd_cgroup
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.nvidia_smi import parse_p2p

from tests.conftest import REPO_ROOT

HOST = REPO_ROOT / "tests" / "fixtures" / "host"
SMI = REPO_ROOT / "tests" / "fixtures" / "nvidia_smi"


def requirements(**changes) -> preflight.Requirements:
    return preflight.Requirements(port=8000, service_unit="vllm.service", **changes)


def empty_shm(room: int = 4096) -> preflight.ShmRoom:
    return preflight.ShmRoom(total_mib=room, free_mib=room, ours_mib=0)


def test_p2p_matrix_of_two_geforce_cards_warns_only_for_tensor_parallelism():
    matrix = parse_p2p((SMI / "rtx5090-2gpu.p2p-rw.txt").read_text())
    assert matrix == {"GPU0": {"GPU1": "GNS"}, "GPU1": {"GPU0": "GNS"}}
    [warning] = preflight.p2p_warnings(matrix, tp=2)
    assert "GPU0-GPU1: GPU not supported" in warning and "tensor parallelism 2" in warning
    assert preflight.p2p_warnings(matrix, tp=1) == []
    assert preflight.p2p_warnings({"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}, tp=2) == []


def test_p2p_parser_refuses_what_is_not_a_matrix():
    with pytest.raises(ValueError, match="no GPU0 column"):
        parse_p2p("No devices were found\n")


@pytest.mark.parametrize(("fixture", "groups", "mode"), [
    ("cmdline.firecracker-vm.txt", 0, "default"),
    ("cmdline.centos7-no-iommu-flags.txt", 0, "default"),
    # AMD boards enable the IOMMU without a flag: the groups show it.
    ("cmdline.centos7-no-iommu-flags.txt", 42, "translated"),
    ("cmdline.amd-a100-iommu-pt.txt", 42, "passthrough"),
])
def test_iommu_mode_from_recorded_kernel_command_lines(fixture: str, groups: int, mode: str):
    assert preflight.iommu_state((HOST / fixture).read_text(), groups).mode == mode


def test_iommu_flags_that_turn_translation_on_or_off():
    assert preflight.iommu_state("ro quiet intel_iommu=on", 0).mode == "translated"
    assert preflight.iommu_state("ro intel_iommu=on iommu=pt", 96).mode == "passthrough"
    assert preflight.iommu_state("ro intel_iommu=off", 0).mode == "off"
    assert preflight.iommu_state("ro iommu.passthrough=1", 12).mode == "passthrough"


def test_translating_iommu_warns_for_pcie_multi_gpu_hosts_only():
    iommu = preflight.iommu_state("ro quiet intel_iommu=on", 64)
    [warning] = preflight.iommu_warnings(iommu, ["Blackwell"], nvlink=False, gpus=8)
    assert "intel_iommu=on" in warning and "on PCIe Blackwell" in warning and "iommu=pt" in warning
    assert preflight.iommu_warnings(iommu, ["Hopper"], nvlink=True, gpus=8) == []
    assert preflight.iommu_warnings(iommu, ["Blackwell"], nvlink=False, gpus=1) == []
    passthrough = preflight.iommu_state("intel_iommu=on iommu=pt", 64)
    assert preflight.iommu_warnings(passthrough, ["Blackwell"], nvlink=False, gpus=8) == []


def test_the_holder_of_a_listening_port_is_found_with_its_unit():
    with socket.socket(socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET) as listener:
        listener.bind(("", 0))
        listener.listen()
        port = listener.getsockname()[1]
        holders = preflight.port_holders(port, Path("/proc"))
    own_unit = preflight.unit_of_cgroup(read_cgroup(Path("/proc/self")))
    assert [(holder.pid, holder.user, holder.unit) for holder in holders] == [(os.getpid(), getpass.getuser(), own_unit)]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        bound = probe.getsockname()[1]  # bound, not listening
        assert preflight.port_holders(bound, Path("/proc")) == []


@pytest.mark.parametrize(("cgroup", "unit"), [
    ("0::/system.slice/vllm.service\n", "vllm.service"),
    ("0::/system.slice/vllm.service/engine\n", "vllm.service"),
    # a hybrid (cgroup v1) host such as the development VM: the unit is on the name=systemd line
    ("9:name=systemd:/system.slice/vllm.service\n4:memory:/system.slice/vllm.service\n0::/\n", "vllm.service"),
    ("0::/user.slice/user-0.slice/session-3.scope\n", "session-3.scope"),
    # a podman test host on that VM: the v2 line is the container's cgroup, the unit only on name=systemd
    ("9:name=systemd:/libpod_parent/libpod-a8e0/system.slice/vllm.service\n0::/libpod_parent/libpod-a8e0\n",
     "vllm.service"),
    ("0::/\n", None),
])
def test_unit_of_a_process_from_its_cgroup(cgroup: str, unit: str | None):
    assert preflight.unit_of_cgroup(systemd_cgroup(cgroup)) == unit


def test_a_port_held_by_the_service_itself_is_fine_and_another_process_is_named():
    in_unit = preflight.PortHolder(412, "python3", "root", "vllm.service")
    as_user = preflight.PortHolder(413, "python3", "vllm", None)
    other = preflight.PortHolder(77, "python3", "jovyan", "jupyter.service")
    req = requirements(service_user="vllm")
    assert preflight.host_problems(req, empty_shm(), [in_unit, as_user]) == []
    [problem] = preflight.host_problems(req, empty_shm(), [in_unit, other])
    assert problem.startswith("port 8000 is taken by pid 77 (python3, jovyan, jupyter.service)")


def test_shm_room_counts_the_service_users_files_as_room(tmp_path: Path):
    (tmp_path / "segment").write_bytes(b"\0" * (3 * preflight.MIB))
    mine = preflight.shm_room(tmp_path, getpass.getuser())
    assert mine.ours_mib == 3 and mine.others_largest == []
    theirs = preflight.shm_room(tmp_path, "an-account-that-does-not-exist")
    assert theirs.ours_mib == 0
    assert theirs.others_largest == [f"{tmp_path}/segment ({getpass.getuser()}, 3 MiB)"]


def test_too_little_shm_is_a_no_go_naming_the_figures_and_the_largest_files():
    shm = preflight.ShmRoom(total_mib=64, free_mib=60, ours_mib=0, others_largest=["/dev/shm/x (nobody, 3 MiB)"])
    [problem] = preflight.host_problems(requirements(min_shm_mib=512), shm, [])
    assert problem.startswith("/dev/shm has 60 MiB free for vLLM (size 64 MiB), it needs at least 512 MiB")
    assert "/dev/shm/x (nobody, 3 MiB)" in problem and "--shm-size" in problem


def test_model_space_counts_only_files_not_yet_placed(tmp_path: Path):
    current = tmp_path / "store" / "demo" / "current"
    current.mkdir(parents=True)
    (current / "a.gguf").write_bytes(b"x" * 100)
    needed, free, where = preflight.model_space(current, {"a.gguf": 100}, margin_mib=1)
    assert needed == 0 and free > 0 and where == str(current.parent)
    needed = preflight.model_space(current, {"a.gguf": 100, "b.gguf": 50}, margin_mib=1)[0]
    assert needed == 50 + preflight.MIB
    needed, where = preflight.model_space(tmp_path / "none" / "demo" / "current", {"a.gguf": 100}, margin_mib=0)[::2]
    assert needed == 100 and where == str(tmp_path)


def test_a_model_set_larger_than_the_disk_is_a_no_go_with_both_figures():
    req = requirements(model_needed=400 * preflight.GIB, model_free=120 * preflight.GIB, model_where="/var/lib")
    [problem] = preflight.host_problems(req, empty_shm(), [])
    assert problem == ("the model set needs 400.00 GiB (with the margin) on /var/lib, 120.00 GiB is free: "
                       "free space there or move model_root")


def test_python_outside_the_wheels_range_or_missing_is_a_no_go():
    in_range = requirements(python=(3, 11), python_range=((3, 10), (3, 13)))
    assert preflight.host_problems(in_range, empty_shm(), []) == []
    [old] = preflight.host_problems(requirements(python=(3, 9), python_range=((3, 10), (3, 13))), empty_shm(), [])
    assert old.startswith("Python 3.9 cannot run the pinned vLLM (it needs 3.10 to 3.13)")
    [missing] = preflight.host_problems(requirements(python=None, python_range=((3, 10), (3, 13))), empty_shm(), [])
    assert missing.startswith("no Python interpreter")
    assert preflight.python_version("Python 3.13.5\n") == (3, 13)


def test_a_nofile_limit_above_the_kernels_ceiling_is_a_no_go():
    [problem] = preflight.host_problems(requirements(limit_nofile=2_000_000, nr_open=1_048_576), empty_shm(), [])
    assert "LimitNOFILE=2000000 is above the kernel's fs.nr_open=1048576" in problem


@pytest.mark.parametrize(("gpu", "branch", "expected"), [
    ({"driver_version": "580.159.04", "cuda_version": "13.0"}, None, ""),
    ({"driver_version": "570.86.10", "cuda_version": "12.8"}, None, "driver 570.86.10 is too old for the vLLM wheel's CUDA 13.0 (needs >= 580.65.06)"),
    ({"driver_version": None}, 570, "no driver yet, and nvidia_driver_branch 570 ships CUDA 12.8"),
    ({"driver_version": None}, 580, ""),
])
def test_driver_or_planned_branch_against_the_wheels_cuda(gpu: dict, branch: int | None, expected: str):
    problems = preflight.driver_problems(gpu, "13.0", branch)
    assert (problems[0].startswith(expected) if expected else problems == []), problems


def test_gpu_count_and_a_missing_gpu_are_no_go():
    [none] = preflight.gpu_problems({"count": 0}, 1, 1, "13.0", 580)
    assert none.startswith("no NVIDIA GPU found")
    [short] = preflight.gpu_problems({"count": 4, "driver_version": "580.159.04", "cuda_version": "13.0"}, 8, 1, "13.0", 580)
    assert short.startswith("tensor x pipeline parallelism 8 x 1 needs 8 GPUs, the host has 4")
