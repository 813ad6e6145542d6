"""Where a test run spends its time: the slow playbook tasks of every run the harness makes,
appended to a JSON lines file that tests/harness/phases.py reads after the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKS_FILE = Path(os.environ.get("VLLM_FLEET_TIMINGS", REPO_ROOT / ".cache" / "timings" / "tasks.jsonl"))
# Tasks shorter than this are noise in a phase table (fact gathering, stats, templates).
MIN_SECONDS = 1.0


def slow_tasks(events: list[dict], min_seconds: float = MIN_SECONDS) -> list[dict]:
    rows = []
    for event in events:
        data = event.get("event_data", {})
        if event.get("event") not in ("runner_on_ok", "runner_on_failed"):
            continue
        seconds = float(data.get("duration") or 0)
        if seconds >= min_seconds:
            rows.append({"host": data.get("host"), "role": data.get("role") or "", "task": data.get("task"),
                         "seconds": round(seconds, 1)})
    return rows


def record_play(playbook: str, events: list[dict], seconds: float) -> None:
    """Append a playbook run and its slow tasks, labelled with the test that ran it."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    TASKS_FILE.parent.mkdir(parents=True, exist_ok=True)
    with TASKS_FILE.open("a") as out:
        out.write(json.dumps({"test": test, "playbook": playbook, "seconds": round(seconds, 1),
                              "tasks": slow_tasks(events)}) + "\n")
