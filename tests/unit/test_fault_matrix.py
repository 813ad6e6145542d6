"""The fault matrix in docs/faults.md lists every fault of tests/harness/faults.py, and every fault
there is recorded by a test (a row appears only after that test's assertions pass)."""

from __future__ import annotations

import re

from tests.conftest import REPO_ROOT
from tests.harness import faults

DOC = REPO_ROOT / "docs" / "faults.md"


def documented_rows() -> dict[str, str]:
    text = DOC.read_text()
    table = text[text.index("## Fault matrix"):]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] not in ("fault", "---"):
            rows[cells[0]] = cells[1]
    return rows


def test_the_documented_matrix_lists_every_fault_and_each_ran():
    rows = documented_rows()
    assert len(faults.FAULTS) >= 14
    assert list(rows) == list(faults.FAULTS.values())
    assert not [fault for fault, survived in rows.items() if survived not in faults.OUTCOMES], rows


def test_every_fault_is_recorded_by_a_test():
    sources = "\n".join(path.read_text() for path in (REPO_ROOT / "tests").rglob("test_*.py"))
    recorded = set(re.findall(r'faults\.record\(\s*"(\w+)"', sources))
    recorded |= set(re.findall(r'\("(\w+)", "[^"]*"\)', sources)) & set(faults.FAULTS)  # parametrized ids
    assert set(faults.FAULTS) <= recorded, set(faults.FAULTS) - recorded


def test_the_table_marks_a_fault_not_run():
    rows = {"crash_loop": faults.Row("crash_loop", "failed clearly", 4.2, "gate: x | y", "config_or_tokenizer")}
    table = faults.table(rows)
    assert f"| {faults.FAULTS['crash_loop']} | failed clearly | none | 4.2 | gate: x \\| y (config_or_tokenizer) |" in table
    assert f"| {faults.FAULTS['shm_full']} | not run | | | |" in table
