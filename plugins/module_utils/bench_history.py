"""Benchmark thresholds and history: fail below a floor, report a regression against the last run.

History is one JSON object per line, appended per run, so earlier runs are never overwritten and
a file can be read by anything that reads JSON lines.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def figure(result: dict[str, Any], name: str) -> float | None:
    """The headline figures that thresholds and regressions look at."""
    levels = result.get("levels") or []
    if name == "decode_tok_s":
        return result["decode"]["tok_s_tpot"]
    if name == "output_throughput":
        return max((level["output_throughput"] for level in levels), default=None)
    if name == "ttft_p99_ms":
        return max((level["ttft_ms"]["p99"] for level in levels), default=result["decode_load"]["ttft_ms"]["p99"])
    if name == "roofline_fraction":
        return result.get("roofline_fraction")
    raise KeyError(name)


# threshold name -> (figure, True when the figure must stay at or above the threshold)
THRESHOLDS = {
    "min_decode_tok_s": ("decode_tok_s", True),
    "min_output_throughput": ("output_throughput", True),
    "max_ttft_p99_ms": ("ttft_p99_ms", False),
    "min_roofline_fraction": ("roofline_fraction", True),
}


def threshold_failures(result: dict[str, Any], thresholds: dict[str, float | None]) -> list[str]:
    failures = []
    for name, limit in thresholds.items():
        if limit is None:
            continue
        if name not in THRESHOLDS:
            raise KeyError(f"unknown threshold {name!r} (known: {', '.join(THRESHOLDS)})")
        figure_name, floor = THRESHOLDS[name]
        value = figure(result, figure_name)
        if value is None:
            failures.append(f"{figure_name} is not available but {name} is set to {limit}")
        elif (floor and value < limit) or (not floor and value > limit):
            failures.append(f"{figure_name} = {value:g} {'below' if floor else 'above'} {name} = {limit:g}")
    return failures


def read_history(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        if line.strip():
            records.append(json.loads(line))
    return records


def previous_record(path: Path, model: str) -> dict[str, Any] | None:
    """The latest earlier run for the same served model."""
    for record in reversed(read_history(path)):
        if record.get("model") == model and record.get("result"):
            return record
    return None


REGRESSION_FIGURES = {"decode_tok_s": True, "output_throughput": True, "ttft_p99_ms": False}


def regressions(current: dict[str, Any], previous: dict[str, Any], allowed_pct: float) -> list[str]:
    """Figures that got worse than the previous run by more than allowed_pct percent."""
    found = []
    for name, higher_is_better in REGRESSION_FIGURES.items():
        now, before = figure(current, name), figure(previous, name)
        if not now or not before:
            continue
        change_pct = (now - before) / before * 100.0
        worse = -change_pct if higher_is_better else change_pct
        if worse > allowed_pct:
            found.append(f"{name} {before:g} -> {now:g} ({change_pct:+.1f} %, allowed {allowed_pct:g} %)")
    return found


def append_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as history:
        history.write(json.dumps(record, sort_keys=True) + "\n")
        history.flush()
        os.fsync(history.fileno())
