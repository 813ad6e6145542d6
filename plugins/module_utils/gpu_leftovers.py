"""Find and stop what still holds a vLLM host's accelerators and resources before a start.

A SIGKILLed vLLM API server leaves its VLLM::EngineCore and Worker_TP* processes holding the
GPUs, and a process from an earlier manual run can hold the serving port or the cards: the next
start then crash-loops. This module finds such holders (the unit's GPU device files open,
nvidia-smi compute apps, the port's listener, the unit's and the service user's processes) and
stale /dev/shm files, and stops them SIGTERM -> wait -> SIGKILL.

What is ours: processes in the unit's cgroup and processes of the service user (those that left
the unit, or an earlier manual run). Anything else that holds the unit's GPUs or port is only
reported, and the caller refuses unless forced. A vLLM process title alone makes nothing ours
(another team's server on the same host), and the system's GPU daemons (persistence daemon,
fabric manager, DCGM) holding device files are never holders.

Standard library only: it runs on the managed host inside an Ansible module.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import re
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

DEFAULT_TITLE_PATTERNS = (r"^VLLM::", r"^Worker_TP\d+", r"^VllmWorker", r"^EngineCore")
# Matched against the program name (argv[0]'s base name, or comm, which the kernel cuts at 15 chars).
DEFAULT_SYSTEM_DAEMONS = ("nvidia-persistenced", "nv-fabricmanager", "nv-hostengine", "dcgm-exporter",
                          "nvidia-dcgm")
GPU_DEVICE = re.compile(r"nvidia(\d+)$")
# A reason that names a process but says nothing about what it holds.
TITLE_REASON = "has a vLLM process title"
DEFAULT_SHM_PATTERNS = ("nccl-*", "psm_*", "vllm*")
TCP_LISTEN_STATE = "0A"


@dataclass
class Holder:
    pid: int
    user: str
    cmdline: str
    reasons: list[str] = field(default_factory=list)
    in_scope: bool = False
    cgroup: str = ""

    def describe(self) -> str:
        return f"pid {self.pid} ({self.user}: {self.cmdline[:80]}) {', '.join(self.reasons)}"


@dataclass
class Scope:
    """What the cleanup may stop: the unit's cgroup and the service user's processes, holding the
    unit's GPUs (None: every GPU) or port."""
    service_user: str
    title_patterns: tuple[str, ...] = DEFAULT_TITLE_PATTERNS
    unit_cgroup: str = ""
    gpus: tuple[int, ...] | None = None
    system_daemons: tuple[str, ...] = DEFAULT_SYSTEM_DAEMONS

    def has_vllm_title(self, cmdline: str, comm: str) -> bool:
        return any(re.search(p, cmdline) or re.search(p, comm) for p in self.title_patterns)

    def in_unit(self, cgroup: str) -> bool:
        return bool(self.unit_cgroup) and (cgroup == self.unit_cgroup or cgroup.startswith(self.unit_cgroup + "/"))

    def owns(self, user: str, cgroup: str) -> bool:
        return self.in_unit(cgroup) or user == self.service_user

    def is_system_daemon(self, cmdline: str, comm: str) -> bool:
        program = os.path.basename(cmdline.split(" ", 1)[0])
        return any(program == name or comm == name[:15] for name in self.system_daemons)

    def is_unit_device(self, path: str) -> bool:
        """A GPU device node of the unit's GPUs (control nodes such as nvidiactl are shared by every
        CUDA process on the host and say nothing about which GPU it uses)."""
        number = GPU_DEVICE.search(os.path.basename(path))
        return bool(number) and (self.gpus is None or int(number.group(1)) in self.gpus)


@dataclass
class CleanupResult:
    holders: list[Holder] = field(default_factory=list)
    stale_shm_files: list[str] = field(default_factory=list)
    terminated: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)
    removed_shm_files: list[str] = field(default_factory=list)
    uninspectable_pids: list[int] = field(default_factory=list)
    gpu_memory_wait_seconds: float | None = None

    @property
    def changed(self) -> bool:
        return bool(self.terminated or self.killed or self.removed_shm_files)

    def as_dict(self) -> dict:
        return {**asdict(self), "changed": self.changed}


def parse_visible_devices(value: str) -> tuple[int, ...] | None:
    """CUDA_VISIBLE_DEVICES -> GPU indices; None (every GPU) when empty or given as UUIDs."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items or not all(item.isdigit() for item in items):
        return None
    return tuple(int(item) for item in items)


# ---------------------------------------------------------------------------- reading /proc


def process_ids(proc_root: Path) -> list[int]:
    return sorted(int(entry.name) for entry in proc_root.iterdir() if entry.name.isdigit())


def read_cmdline(proc_dir: Path) -> str:
    try:
        return proc_dir.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def read_comm(proc_dir: Path) -> str:
    try:
        return proc_dir.joinpath("comm").read_text().strip()
    except OSError:
        return ""


def systemd_cgroup(cgroup_file: str) -> str:
    """The cgroup systemd placed a process in ("/system.slice/vllm.service"), from /proc/PID/cgroup's
    text: the hierarchy systemd tracks units in, name=systemd on a v1 or hybrid host (where the v2
    line may be "/" or, in a container, the container's own cgroup), else the v2 line. The path is
    the one `systemctl show -p ControlGroup` gives for the unit."""
    paths = {}
    for line in cgroup_file.splitlines():
        _number, hierarchy, path = (line.split(":", 2) + ["", ""])[:3]
        paths[hierarchy] = path
    return paths.get("name=systemd") or paths.get("", "")


def read_cgroup(proc_dir: Path) -> str:
    """The process's systemd cgroup path (see systemd_cgroup); "" when unreadable."""
    try:
        return systemd_cgroup(proc_dir.joinpath("cgroup").read_text())
    except OSError:
        return ""


def read_user(proc_dir: Path) -> str:
    try:
        uid = proc_dir.stat().st_uid
    except OSError:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def open_targets(proc_dir: Path) -> list[str] | None:
    """What each open file descriptor of a process points at (paths, socket:[inode], ...);
    None when they cannot be read (another user's process without CAP_SYS_PTRACE)."""
    fd_dir = proc_dir / "fd"
    targets = []
    try:
        names = os.listdir(fd_dir)
    except FileNotFoundError:
        return targets
    except PermissionError:
        return None
    for name in names:
        try:
            targets.append(os.readlink(fd_dir / name))
        except PermissionError:
            return None
        except OSError:
            continue
    return targets


def mapped_paths(proc_dir: Path) -> set[str]:
    """Files a process has mmapped (shared memory stays mapped after its fd is closed)."""
    try:
        lines = proc_dir.joinpath("maps").read_text().splitlines()
    except OSError:
        return set()
    return {line.split(None, 5)[5] for line in lines if len(line.split(None, 5)) == 6}


def listening_socket_inodes(port: int, proc_root: Path) -> set[str]:
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = proc_root.joinpath("net", table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == TCP_LISTEN_STATE:
                inodes.add(fields[9])
    return inodes


# ------------------------------------------------------------------------------ nvidia-smi


def parse_compute_apps(csv_text: str) -> dict[int, int]:
    """`nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` -> {pid: MiB}."""
    apps: dict[int, int] = {}
    for line in csv_text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            apps[int(parts[0])] = apps.get(int(parts[0]), 0) + (int(parts[1]) if parts[1].isdigit() else 0)
    return apps


def parse_gpu_memory_used(csv_text: str) -> dict[int, int]:
    """`nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits` -> {gpu: MiB}."""
    used = {}
    for line in csv_text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            used[int(parts[0])] = int(parts[1])
    return used


def run_nvidia_smi(nvidia_smi: str, query: str) -> str:
    # subprocess, not AnsibleModule.run_command: nvidia-smi hangs when the driver does, and
    # run_command has no timeout.
    result = subprocess.run(  # pylint: disable=ansible-bad-function
        [nvidia_smi, query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30, check=False)
    return result.stdout if result.returncode == 0 else ""


# ------------------------------------------------------------------------------- discovery


def protected_pids(proc_root: Path, own_pid: int) -> set[int]:
    """This process and its ancestors (the module, Ansible's wrapper, sshd, init)."""
    protected = {1, own_pid}
    pid = own_pid
    while pid > 1:
        try:
            stat = proc_root.joinpath(str(pid), "stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        protected.add(pid)
    return protected


def find_holders(
    scope: Scope,
    device_glob: str,
    port: int | None,
    gpu_apps: dict[int, int] | None = None,
    proc_root: Path = Path("/proc"),
    own_pid: int | None = None,
    uninspectable: list[int] | None = None,
) -> list[Holder]:
    """Our processes (scope.owns) and anything else holding the unit's GPUs or port; pids whose
    open files could not be read are appended to `uninspectable` (they may hold a device unseen)."""
    protected = protected_pids(proc_root, own_pid or os.getpid())
    port_inodes = {f"socket:[{inode}]" for inode in listening_socket_inodes(port, proc_root)} if port else set()
    holders = []
    for pid in process_ids(proc_root):
        if pid in protected:
            continue
        proc_dir = proc_root / str(pid)
        cmdline, comm, user = read_cmdline(proc_dir), read_comm(proc_dir), read_user(proc_dir)
        if not cmdline:  # kernel threads and processes gone meanwhile
            continue
        targets = open_targets(proc_dir)
        if targets is None:
            if uninspectable is not None:
                uninspectable.append(pid)
            targets = []
        cgroup = read_cgroup(proc_dir)
        ours = scope.owns(user, cgroup)
        reasons = holder_reasons(scope, device_glob, port, port_inodes, gpu_apps or {}, pid, cmdline, comm, user,
                                 cgroup, targets)
        if not ours and scope.is_system_daemon(cmdline, comm) and not port_inodes.intersection(targets):
            continue
        if ours or any(reason != TITLE_REASON for reason in reasons):
            holders.append(Holder(pid, user, cmdline, reasons, ours, cgroup))
    return holders


def holder_reasons(
    scope: Scope, device_glob: str, port: int | None, port_inodes: set[str], gpu_apps: dict[int, int],
    pid: int, cmdline: str, comm: str, user: str, cgroup: str, targets: list[str],
) -> list[str]:
    held = {t for t in targets if fnmatch.fnmatch(t, device_glob) and scope.is_unit_device(t)}
    reasons = [f"holds {path}" for path in sorted(held)]
    if pid in gpu_apps:
        reasons.append(f"uses {gpu_apps[pid]} MiB of GPU memory")
    if port_inodes.intersection(targets):
        reasons.append(f"listens on port {port}")
    if scope.has_vllm_title(cmdline, comm):
        reasons.append(TITLE_REASON)
    if scope.in_unit(cgroup):
        reasons.append(f"runs in the unit's cgroup {scope.unit_cgroup}")
    if user == scope.service_user:
        reasons.append(f"runs as the service user {user}")
    return reasons


def stale_shm_files(shm_dir: Path, patterns: Iterable[str], proc_root: Path = Path("/proc")) -> list[str]:
    """Files in shm_dir matching patterns that no live process has open or mapped."""
    candidates = sorted(str(p) for p in shm_dir.iterdir() if any(fnmatch.fnmatch(p.name, pat) for pat in patterns)) \
        if shm_dir.is_dir() else []
    if not candidates:
        return []
    in_use: set[str] = set()
    for pid in process_ids(proc_root):
        proc_dir = proc_root / str(pid)
        in_use.update(open_targets(proc_dir) or [])
        in_use.update(mapped_paths(proc_dir))
    return [path for path in candidates if path not in in_use and f"{path} (deleted)" not in in_use]


# -------------------------------------------------------------------------------- stopping


def alive(pid: int, proc_root: Path = Path("/proc")) -> bool:
    """True while the process exists and is not a zombie waiting for its parent."""
    try:
        stat = proc_root.joinpath(str(pid), "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until_gone(pids: Iterable[int], timeout: float, is_alive: Callable[[int], bool],
                    sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> list[int]:
    deadline = clock() + timeout
    remaining = [pid for pid in pids if is_alive(pid)]
    while remaining and clock() < deadline:
        sleep(0.2)
        remaining = [pid for pid in remaining if is_alive(pid)]
    return remaining


def send(pid: int, signum: int) -> bool:
    try:
        os.kill(pid, signum)
        return True
    except ProcessLookupError:
        return False


def stop_processes(pids: list[int], term_timeout: float, kill_timeout: float, result: CleanupResult,
                   is_alive: Callable[[int], bool] = alive) -> None:
    """SIGTERM, wait, SIGKILL what is left, wait; records who went which way and who survived."""
    signalled = [pid for pid in pids if send(pid, signal.SIGTERM)]
    stubborn = wait_until_gone(signalled, term_timeout, is_alive)
    result.terminated = [pid for pid in signalled if pid not in stubborn]
    result.killed = [pid for pid in stubborn if send(pid, signal.SIGKILL)]
    result.survivors = wait_until_gone(result.killed, kill_timeout, is_alive)


def wait_for_gpu_memory(read_used: Callable[[], dict[int, int]], free_below_mib: int, timeout: float,
                        sleep: Callable[[float], None] = time.sleep,
                        clock: Callable[[], float] = time.monotonic,
                        gpus: tuple[int, ...] | None = None) -> tuple[float, dict[int, int]]:
    """Seconds until each of these GPUs (None: every GPU) uses less than free_below_mib; the last
    reading of them either way."""
    def read() -> dict[int, int]:
        return {gpu: mib for gpu, mib in read_used().items() if gpus is None or gpu in gpus}
    started = clock()
    used = read()
    while any(mib >= free_below_mib for mib in used.values()) and clock() - started < timeout:
        sleep(1.0)
        used = read()
    return clock() - started, used


def out_of_scope_message(holders: list[Holder]) -> str:
    listed = "; ".join(holder.describe() for holder in holders)
    return (f"refusing to stop {len(holders)} process(es) outside the cleanup scope (neither in the unit's cgroup "
            f"nor the service user's) that hold the unit's GPUs or port: {listed}. Nothing was stopped. "
            f"Stop them yourself, or force the cleanup.")
