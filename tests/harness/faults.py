"""The fault matrix: every fault test records one row once its assertions have passed, and the
rows of a run print as one table (`python -m tests.harness.faults`, at the end of run-tests.sh).

FAULTS is the catalogue, in the table's order; docs/faults.md keeps the table of a full run, and
tests/unit/test_fault_matrix.py keeps both in step (every fault documented and recorded by a test).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_ROWS = REPO_ROOT / ".cache" / "timings" / "faults.jsonl"

FAULTS: dict[str, str] = {
    "orphan_engine": "orphan VLLM::EngineCore of the service user, stale /dev/shm files, a GPU holder of ours",
    "foreign_gpu_holder": "another account's process holds the unit's GPU",
    "foreign_port_holder": "another account's process listens on the serving port",
    "bad_input": "mistyped variable, settings out of range, placeholder API key, a service user the role did not create",
    "preflight_no_room": "site.yml on a host whose /dev/shm is full and whose disk is smaller than the model set",
    "crash_loop": "a release that crash-loops at start (bad argument)",
    "failing_release_mid_roll": "a release failing its gate on the first host of a rolling deploy",
    "download_dropped": "the connection drops in the middle of a shard download",
    "download_bad_set": "a downloaded shard set that fails its checks (sha256, size, shard list)",
    "download_no_space": "a model set larger than the free space of the model filesystem",
    "download_fs_full": "the model filesystem filling up in the middle of a shard download",
    "patch_killed": "the patch build SIGKILLed in the middle of cloning the venv",
    "reboot_new_address": "a reboot that gives the host another address",
    "transient_start_failure": "start failures that pass after a while (the release's venv missing)",
    "api_server_sigkill": "SIGKILL of the API server (vLLM's main process)",
    "engine_oom_kill": "the engine core killed as the kernel's OOM killer kills (SIGKILL)",
    "shm_full": "/dev/shm filled by another account's process",
    "compile_cache_corrupt": "a corrupted torch.compile cache",
    "killed_between_switch_and_gate": "ansible-playbook killed after the release switch, before the gate",
    "shard_corrupted": "a model shard corrupted on disk after the deploy (size and mtime unchanged)",
}


OUTCOMES = ("recovered", "refused before any change", "failed clearly")


@dataclass(frozen=True)
class Row:
    fault: str
    survived: str  # one of OUTCOMES
    seconds: float | None  # from the fault to serving again, or to the failure that names it
    message: str
    triage_class: str = ""
    data_lost: str = "none"


def rows_path() -> Path:
    return Path(os.environ.get("VLLM_FLEET_FAULTS", str(DEFAULT_ROWS)))


def record(fault: str, *, survived: str, seconds: float | None, message: str, triage_class: str = "",
           data_lost: str = "none") -> None:
    """One row of the matrix; call it after the test's assertions, so that only proven rows appear."""
    if fault not in FAULTS:
        raise KeyError(f"{fault} is not in tests/harness/faults.py FAULTS")
    if survived not in OUTCOMES:
        raise ValueError(f"survived={survived!r}: one of {OUTCOMES}")
    row = Row(fault, survived, None if seconds is None else round(seconds, 1), " ".join(message.split())[:240],
              triage_class, data_lost)
    path = rows_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(asdict(row)) + "\n")


def read_rows(path: Path) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = Row(**json.loads(line))
                rows[row.fault] = row
    return rows


def table(rows: dict[str, Row]) -> str:
    lines = ["| fault | survived | data lost | seconds to recover | message (triage class) |",
             "|---|---|---|---|---|"]
    for fault, description in FAULTS.items():
        row = rows.get(fault)
        if row is None:
            lines.append(f"| {description} | not run | | | |")
            continue
        seconds = "" if row.seconds is None else f"{row.seconds:.1f}"
        message = row.message.replace("|", "\\|") + (f" ({row.triage_class})" if row.triage_class else "")
        lines.append(f"| {description} | {row.survived} | {row.data_lost} | {seconds} | {message} |")
    return "\n".join(lines)


def main() -> int:
    rows = read_rows(rows_path())
    print(f"\n## Fault matrix ({len(rows)} of {len(FAULTS)} faults recorded in this run)\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
