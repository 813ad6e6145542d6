"""Find and stop what still holds a vLLM host's accelerators and resources before a start.

A SIGKILLed vLLM API server leaves its VLLM::EngineCore and Worker_TP* processes holding the
GPUs, and a process from an earlier manual run can hold the serving port or the cards: the next
start then crash-loops. This module finds such holders (device files open, nvidia-smi compute
apps, vLLM process titles, the service user's processes, the port's listener) and stale
/dev/shm files, and stops them SIGTERM -> wait -> SIGKILL. Processes outside the declared scope
(not the service user's, no vLLM title) are only reported unless the caller forces it.

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
DEFAULT_SHM_PATTERNS = ("nccl-*", "psm_*", "vllm*")
TCP_LISTEN_STATE = "0A"


@dataclass
class Holder:
    pid: int
    user: str
    cmdline: str
    reasons: list[str] = field(default_factory=list)
    in_scope: bool = False

    def describe(self) -> str:
        return f"pid {self.pid} ({self.user}: {self.cmdline[:80]}) {', '.join(self.reasons)}"


@dataclass
class Scope:
    service_user: str
    title_patterns: tuple[str, ...] = DEFAULT_TITLE_PATTERNS

    def has_vllm_title(self, cmdline: str, comm: str) -> bool:
        return any(re.search(p, cmdline) or re.search(p, comm) for p in self.title_patterns)


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
    result = subprocess.run([nvidia_smi, query, "--format=csv,noheader,nounits"],
                            capture_output=True, text=True, timeout=30, check=False)
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
    """Holders of the GPUs, the port or a vLLM title; pids whose open files could not be read are
    appended to `uninspectable` (they may hold a device unseen)."""
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
        reasons = holder_reasons(scope, device_glob, port, port_inodes, gpu_apps or {}, pid, cmdline, comm, user, targets)
        if reasons:
            in_scope = user == scope.service_user or scope.has_vllm_title(cmdline, comm)
            holders.append(Holder(pid, user, cmdline, reasons, in_scope))
    return holders


def holder_reasons(
    scope: Scope, device_glob: str, port: int | None, port_inodes: set[str], gpu_apps: dict[int, int],
    pid: int, cmdline: str, comm: str, user: str, targets: list[str],
) -> list[str]:
    reasons = [f"holds {path}" for path in sorted({t for t in targets if fnmatch.fnmatch(t, device_glob)})]
    if pid in gpu_apps:
        reasons.append(f"uses {gpu_apps[pid]} MiB of GPU memory")
    if port_inodes.intersection(targets):
        reasons.append(f"listens on port {port}")
    if scope.has_vllm_title(cmdline, comm):
        reasons.append("has a vLLM process title")
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
                        clock: Callable[[], float] = time.monotonic) -> tuple[float, dict[int, int]]:
    """Seconds until every GPU uses less than free_below_mib; the last reading either way."""
    started = clock()
    used = read_used()
    while any(mib >= free_below_mib for mib in used.values()) and clock() - started < timeout:
        sleep(1.0)
        used = read_used()
    return clock() - started, used


def out_of_scope_message(holders: list[Holder]) -> str:
    listed = "; ".join(holder.describe() for holder in holders)
    return (f"refusing to stop {len(holders)} process(es) outside the cleanup scope (not the service user's, "
            f"no vLLM process title): {listed}. Stop them yourself, or force the cleanup.")
