"""Print where a test run spent its time: the CI phases (.ci/run's stamps), the playbook work
inside the tests by kind (wheelhouse, venv, vLLM starts, verify benchmarks), the time per test
area and the slowest tests (pytest's JUnit XML).

    python -m tests.harness.phases [--phases FILE] [--junit FILE ...] [--tasks FILE] [--markdown]

The JUnit files default to every .cache/timings/junit-*.xml (tools/run-tests.sh writes one per
lane); with two lanes side by side, the areas' seconds add up to more than the wall time.
"""

from __future__ import annotations

import argparse
import json
from xml.etree import ElementTree
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tests.harness.timings import REPO_ROOT, TASKS_FILE

PHASES_FILE = REPO_ROOT / ".cache" / "timings" / "ci-phases.tsv"
TIMINGS_DIR = REPO_ROOT / ".cache" / "timings"
# Playbook tasks by the kind of work they are (task names as the roles spell them).
TASK_KINDS = {
    "Download the wheels": "wheelhouse download (controller)",
    "Sync the wheelhouse to the host": "wheelhouse sync to hosts",
    "Install the system packages vLLM needs": "apt packages on hosts",
    "Install the profile's packages with their dependencies": "venv install",
    "Install the profile's packages without their dependencies": "venv install",
    "Check the env imports vLLM": "venv import check",
    "Wait until vLLM serves, failing fast on a crash": "vLLM start until ready",
    "Benchmark the service and check its output from the controller": "verify benchmark",
    "Check the release's greedy output against the model profile": "release gate (greedy check)",
    "Copy the GGUF file(s), config and tokenizer": "model copy to hosts",
    "Download, verify and place the model set, then switch current to it": "model verify and place",
}


@dataclass
class Row:
    name: str
    seconds: float
    count: int = 1


def read_phases(path: Path) -> list[Row]:
    """.ci/run's stamps: 'name<TAB>start epoch<TAB>end epoch' per line."""
    if not path.exists():
        return []
    rows: dict[str, Row] = {}
    for line in path.read_text().splitlines():
        name, start, end = line.split("\t")
        row = rows.setdefault(name, Row(name, 0.0, 0))
        row.seconds += float(end) - float(start)
        row.count += 1
    return list(rows.values())


def read_tests(*paths: Path) -> list[tuple[str, float]]:
    tests = []
    for path in paths:
        if path.exists():
            cases = ElementTree.parse(path).getroot().iter("testcase")
            tests += [(f"{case.get('classname')}::{case.get('name')}", float(case.get("time", 0))) for case in cases]
    return tests


def by_area(tests: list[tuple[str, float]]) -> list[Row]:
    areas: dict[str, Row] = {}
    for name, seconds in tests:
        parts = name.split("::")[0].split(".")
        area = ".".join(parts[:3]) if parts[:2] == ["tests", "e2e"] or parts[:2] == ["tests", "integration"] \
            else ".".join(parts[:2])
        row = areas.setdefault(area, Row(area, 0.0, 0))
        row.seconds += seconds
        row.count += 1
    return sorted(areas.values(), key=lambda row: -row.seconds)


def task_kinds(path: Path) -> list[Row]:
    if not path.exists():
        return []
    kinds: dict[str, Row] = defaultdict(lambda: Row("", 0.0, 0))
    for line in path.read_text().splitlines():
        for task in json.loads(line)["tasks"]:
            kind = TASK_KINDS.get(task["task"])
            if kind:
                row = kinds[kind]
                row.name, row.seconds, row.count = kind, row.seconds + task["seconds"], row.count + 1
    return sorted(kinds.values(), key=lambda row: -row.seconds)


def table(title: str, rows: list[Row], markdown: bool, unit: str = "n") -> str:
    if not rows:
        return f"{title}: no data\n"
    lines = [f"\n{title}"]
    if markdown:
        lines += [f"| {title.split(' (')[0]} | seconds | min:s | {unit} |", "|---|---:|---:|---:|"]
        lines += [f"| {r.name} | {r.seconds:.0f} | {int(r.seconds // 60)}:{int(r.seconds % 60):02d} | {r.count} |"
                  for r in rows]
    else:
        width = max(len(r.name) for r in rows)
        lines += [f"  {r.name:<{width}}  {r.seconds:8.0f} s  {int(r.seconds // 60):3d}:{int(r.seconds % 60):02d}"
                  f"  {unit}={r.count}" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phases", type=Path, default=PHASES_FILE)
    parser.add_argument("--junit", type=Path, nargs="+", default=sorted(TIMINGS_DIR.glob("junit-*.xml")))
    parser.add_argument("--tasks", type=Path, default=TASKS_FILE)
    parser.add_argument("--slowest", type=int, default=15)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    phases, tests = read_phases(args.phases), read_tests(*args.junit)
    total = sum(row.seconds for row in phases)
    if phases:
        phases.append(Row("total", total))
    print(table("CI phases (.ci/run)", phases, args.markdown, unit="runs"), end="")
    print(table("pytest by area", by_area(tests), args.markdown, unit="tests"), end="")
    print(table("playbook work inside the tests, by kind", task_kinds(args.tasks), args.markdown, unit="tasks"), end="")
    slowest = [Row(name, seconds) for name, seconds in sorted(tests, key=lambda t: -t[1])[:args.slowest]]
    print(table(f"slowest {args.slowest} tests (setup included)", slowest, args.markdown, unit="runs"), end="")
    if tests:
        print(f"\n{len(tests)} tests, {sum(seconds for _name, seconds in tests) / 60:.1f} min in pytest"
              + (f"; whole run {total / 60:.1f} min" if phases else ""))


if __name__ == "__main__":
    main()
