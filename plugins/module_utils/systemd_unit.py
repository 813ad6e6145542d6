"""Read a systemd unit's state and its journal (standard library only, runs on the host)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from typing import Callable

Runner = Callable[[list[str]], str]
STATE_PROPERTIES = ("ActiveState", "SubState", "MainPID", "NRestarts", "Result", "ExecMainStatus",
                    "InvocationID", "InactiveExitTimestamp")


def run_command(argv: list[str]) -> str:
    # subprocess, not AnsibleModule.run_command, which has no timeout: a systemctl or journalctl
    # that hangs must not hold the module (and the play) forever.
    return subprocess.run(  # pylint: disable=ansible-bad-function
        argv, capture_output=True, text=True, check=True, timeout=60).stdout


@dataclass(frozen=True)
class UnitState:
    active_state: str
    sub_state: str
    main_pid: int
    n_restarts: int
    result: str
    exec_main_status: int
    invocation_id: str
    started_at: int | None  # InactiveExitTimestamp, seconds since the epoch

    def describe(self) -> str:
        return (f"{self.active_state} ({self.sub_state}), MainPID {self.main_pid}, NRestarts {self.n_restarts}, "
                f"Result {self.result}, exit status {self.exec_main_status}")


def parse_show(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def to_int(value: str, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def unix_timestamp(value: str) -> int | None:
    """'@1796050322' (systemctl --timestamp=unix) -> 1796050322; '' or 'n/a' -> None."""
    return to_int(value[1:], 0) or None if value.startswith("@") else None


def unit_state_from_show(properties: dict[str, str]) -> UnitState:
    return UnitState(
        active_state=properties.get("ActiveState", ""),
        sub_state=properties.get("SubState", ""),
        main_pid=to_int(properties.get("MainPID", "0")),
        n_restarts=to_int(properties.get("NRestarts", "0")),
        result=properties.get("Result", ""),
        exec_main_status=to_int(properties.get("ExecMainStatus", "0")),
        invocation_id=properties.get("InvocationID", ""),
        started_at=unix_timestamp(properties.get("InactiveExitTimestamp", "")),
    )


def read_unit_state(unit: str, run: Runner = run_command) -> UnitState:
    text = run(["systemctl", "show", unit, "--timestamp=unix", "--property=" + ",".join(STATE_PROPERTIES)])
    return unit_state_from_show(parse_show(text))


def read_journal(unit: str, since: int | None = None, max_lines: int = 20000, run: Runner = run_command) -> str:
    """The unit's journal as `journalctl -o json` lines, from `since` (epoch seconds) on."""
    argv = ["journalctl", "--unit", unit, "--output", "json", "--no-pager", "--lines", str(max_lines)]
    if since:
        argv += ["--since", f"@{since}"]
    return run(argv)
