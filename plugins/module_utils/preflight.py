"""Go / no-go for a vLLM host, read before anything is changed on it.

Reads the host (shared memory, disk for the model set, the port, Python, file-descriptor limit,
IOMMU and NUMA) and judges it together with the GPU facts of `nvidia_gpu_facts`: each problem is a
no-go that names the figures and the fix; what may only cost speed is a warning. The role
`preflight` runs it first in site.yml; `vllm_service` uses its shared-memory reading before every
restart.

Standard library only: it runs on the managed host inside an Ansible module.
"""

from __future__ import annotations

import pwd
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gpu_leftovers import (
    listening_socket_inodes, open_targets, process_ids, read_cgroup, read_comm, read_user)
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import existing_ancestor

MIB = 2**20
GIB = 2**30

# CUDA version each driver branch ships (the branch a host without a driver will get).
BRANCH_CUDA = {525: "12.0", 530: "12.1", 535: "12.2", 545: "12.3", 550: "12.4", 555: "12.5", 560: "12.6",
               565: "12.7", 570: "12.8", 575: "12.9", 580: "13.0", 590: "13.1"}
# Oldest driver that runs any CUDA of that major release (CUDA minor version compatibility).
MIN_DRIVER_FOR_CUDA_MAJOR = {12: "525.60.13", 13: "580.65.06"}
# nvidia-smi topo -p2p legend: OK is the only state that lets NCCL use P2P.
P2P_STATES = {"OK": "ok", "CNS": "chipset not supported", "GNS": "GPU not supported",
              "TNS": "topology not supported", "NS": "not supported", "DR": "disabled by regkey", "U": "unknown"}


@dataclass
class ShmRoom:
    """/dev/shm as the next start finds it: free now plus what the service user's own files hold."""
    total_mib: int
    free_mib: int
    ours_mib: int
    others_largest: list[str] = field(default_factory=list)

    @property
    def room_mib(self) -> int:
        return self.free_mib + self.ours_mib


@dataclass
class PortHolder:
    pid: int
    command: str
    user: str
    unit: str | None


@dataclass
class Iommu:
    mode: str  # "passthrough", "translated", "off" or "default"
    groups: int
    cmdline_flags: list[str]


@dataclass
class Verdict:
    no_go: list[str] = field(default_factory=list)
    cautions: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------- readers


def shm_room(shm: Path, user: str) -> ShmRoom:
    usage = shutil.disk_usage(shm)
    try:
        uid: int | None = pwd.getpwnam(user).pw_uid
    except KeyError:
        uid = None
    ours, others = 0, []
    for entry in shm.iterdir():
        try:
            info = entry.lstat()
        except FileNotFoundError:
            continue
        if not entry.is_file():
            continue
        if info.st_uid == uid:
            ours += info.st_size
        elif info.st_size > MIB:
            others.append((info.st_size, entry, read_user(entry)))  # the owner's name, as for a process
    largest = [f"{path} ({owner}, {size // MIB} MiB)" for size, path, owner in sorted(others, reverse=True)[:3]]
    return ShmRoom(usage.total // MIB, usage.free // MIB, ours // MIB, largest)


def port_holders(port: int, proc: Path) -> list[PortHolder]:
    """Processes listening on TCP `port` (any address, IPv4 and IPv6), with their account and unit."""
    wanted = {f"socket:[{inode}]" for inode in listening_socket_inodes(port, proc)}
    if not wanted:
        return []
    holders = []
    for pid in process_ids(proc):
        proc_dir = proc / str(pid)
        if wanted.intersection(open_targets(proc_dir) or []):
            holders.append(PortHolder(pid, read_comm(proc_dir), read_user(proc_dir),
                                      unit_of_cgroup(read_cgroup(proc_dir))))
    return holders


def unit_of_cgroup(cgroup: str) -> str | None:
    """The systemd unit of a process in `cgroup` (its systemd cgroup path, see read_cgroup)."""
    units = [part for part in cgroup.split("/") if part.endswith((".service", ".scope"))]
    return units[-1] if units else None


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def iommu_state(cmdline: str, groups: int) -> Iommu:
    flags = [flag for flag in cmdline.split() if re.match(r"(intel_iommu|amd_iommu|iommu)(\.\w+)?=", flag)]
    values = {flag.split("=", 1)[0]: flag.split("=", 1)[1] for flag in flags}
    if values.get("iommu") == "pt" or values.get("iommu.passthrough") == "1":
        mode = "passthrough"
    elif values.get("intel_iommu") == "off" or values.get("amd_iommu") == "off" or values.get("iommu") == "off":
        mode = "off"
    elif values.get("intel_iommu", "").startswith("on") or values.get("amd_iommu") == "on" or groups > 0:
        mode = "translated"
    else:
        mode = "default"
    return Iommu(mode, groups, flags)


def numa_nodes(sysfs: Path) -> int:
    return len(list((sysfs / "devices/system/node").glob("node[0-9]*")))


def python_version(text: str) -> tuple[int, int] | None:
    match = re.search(r"Python (\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


# ---------------------------------------------------------------------------- judgements


def model_space(current: Path, sizes: dict[str, int], margin_mib: int) -> tuple[int, int, str]:
    """Bytes the model set still needs on the store's filesystem (files already placed in `current`
    with the same size need none), the free bytes there and where that was measured."""
    needed = 0
    for name, size in sizes.items():
        placed = current / name
        if not (placed.is_file() and placed.stat().st_size == size):
            needed += size
    where = existing_ancestor(current.parent)
    margin = margin_mib * MIB if needed else 0
    return needed + margin, shutil.disk_usage(where).free, str(where)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def driver_problems(gpu: dict, wheel_cuda: str, planned_branch: int | None) -> list[str]:
    """The driver (installed, or the branch gpu_host.yml will install) against the wheel's CUDA."""
    if not wheel_cuda:
        return []
    wheel = version_tuple(wheel_cuda)
    driver = gpu.get("driver_version")
    if driver:
        driver_cuda = gpu.get("cuda_version") or ""
        minimum = MIN_DRIVER_FOR_CUDA_MAJOR.get(wheel[0])
        if minimum and version_tuple(driver) < version_tuple(minimum):
            return [f"driver {driver} is too old for the vLLM wheel's CUDA {wheel_cuda} (needs >= {minimum}): "
                    f"raise nvidia_driver_branch and run playbooks/gpu_host.yml"]
        if driver_cuda and version_tuple(driver_cuda)[:1] < wheel[:1]:
            return [f"driver {driver} supports CUDA {driver_cuda}, the vLLM wheel needs CUDA {wheel_cuda}: "
                    f"raise nvidia_driver_branch and run playbooks/gpu_host.yml"]
        return []
    if planned_branch is None:
        return []
    branch_cuda = BRANCH_CUDA.get(planned_branch)
    if branch_cuda and version_tuple(branch_cuda)[:1] < wheel[:1]:
        return [f"no driver yet, and nvidia_driver_branch {planned_branch} ships CUDA {branch_cuda}: the vLLM "
                f"wheel needs CUDA {wheel_cuda}; pick a branch that ships CUDA {wheel[0]}.x"]
    return []


def p2p_warnings(matrix: dict[str, dict[str, str]], tp: int) -> list[str]:
    pairs = sorted({f"{a}-{b}: {P2P_STATES.get(state, state)}" for a, peers in matrix.items()
                    for b, state in peers.items() if state != "OK" and a < b})
    if tp <= 1 or not pairs:
        return []
    return [f"GPU peer-to-peer is not available ({', '.join(pairs[:4])}{', ...' if len(pairs) > 4 else ''}): "
            f"NCCL falls back to copies through host memory for tensor parallelism {tp}, slower all-reduce"]


def iommu_warnings(iommu: Iommu, architectures: list[str], nvlink: bool, gpus: int) -> list[str]:
    if iommu.mode != "translated" or gpus < 2 or nvlink:
        return []
    blackwell = " on PCIe Blackwell" if "Blackwell" in architectures else ""
    return [f"the IOMMU translates DMA ({' '.join(iommu.cmdline_flags) or f'{iommu.groups} IOMMU groups'}): "
            f"NCCL's PCIe peer-to-peer transfers can hang{blackwell} (the known NCCL hang at the first "
            "all-reduce); boot with iommu=pt (or the IOMMU off) and ACS disabled on the GPUs' PCIe switches, "
            "or set NCCL_P2P_DISABLE=1"]


@dataclass
class Requirements:
    """What the host must offer; a check whose requirement is left unset is not judged. The port may
    be held by the service's own unit or account (the cleanup's scope)."""
    port: int
    service_unit: str
    service_user: str = ""
    min_shm_mib: int = 0
    python: tuple[int, int] | None = None
    python_range: tuple[tuple[int, int], tuple[int, int]] | None = None
    limit_nofile: int = 0
    nr_open: int = 0
    model_needed: int = 0
    model_free: int = 0
    model_where: str = ""
    tp: int = 1
    pp: int = 1


def host_problems(req: Requirements, shm: ShmRoom, holders: list[PortHolder]) -> list[str]:
    problems = []
    if shm.room_mib < req.min_shm_mib:
        problems.append(
            f"/dev/shm has {shm.room_mib} MiB free for vLLM (size {shm.total_mib} MiB), it needs at least "
            f"{req.min_shm_mib} MiB: free it (largest files of other accounts: {', '.join(shm.others_largest) or 'none'}) "
            "or give the host (container: --shm-size) more")
    if req.model_needed > req.model_free:
        problems.append(
            f"the model set needs {req.model_needed / GIB:.2f} GiB (with the margin) on {req.model_where}, "
            f"{req.model_free / GIB:.2f} GiB is free: free space there or move model_root")
    foreign = [holder for holder in holders if holder.unit != req.service_unit and holder.user != req.service_user]
    if foreign:
        names = ", ".join(f"pid {h.pid} ({h.command}, {h.user}{', ' + h.unit if h.unit else ''})" for h in foreign)
        problems.append(f"port {req.port} is taken by {names}: stop it or set vllm_service_port to a free port")
    problems += python_problems(req)
    if req.limit_nofile > req.nr_open:
        problems.append(f"the unit's LimitNOFILE={req.limit_nofile} is above the kernel's fs.nr_open={req.nr_open}: "
                        "lower vllm_service_limit_nofile or raise fs.nr_open")
    return problems


def python_problems(req: Requirements) -> list[str]:
    if req.python_range is None:
        return []
    low, high = req.python_range
    problems = []
    if req.python is None:
        problems.append("no Python interpreter for the vLLM environment: install python3 (python_env_interpreter)")
    elif not low <= req.python <= high:
        problems.append(f"Python {req.python[0]}.{req.python[1]} cannot run the pinned vLLM (it needs "
                        f"{low[0]}.{low[1]} to {high[0]}.{high[1]}): set python_env_interpreter to one in range")
    return problems


def gpu_problems(gpu: dict, tp: int, pp: int, wheel_cuda: str, planned_branch: int | None) -> list[str]:
    count = gpu.get("count", 0)
    if count == 0:
        return ["no NVIDIA GPU found (PCI scan and nvidia-smi): check the host, or set fleet_accelerator: cpu"]
    problems = []
    if tp * pp > count:
        problems.append(f"tensor x pipeline parallelism {tp} x {pp} needs {tp * pp} GPUs, the host has {count}: "
                        "lower fleet_model.tensor_parallel_size")
    if gpu.get("nvml_mismatch"):
        problems.append(f"nvidia-smi: {gpu['nvml_mismatch']['message']}: reboot into the installed driver")
    return problems + driver_problems(gpu, wheel_cuda, planned_branch)
