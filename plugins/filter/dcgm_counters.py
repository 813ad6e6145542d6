"""dcgm_counter_problems: the counters list for dcgm-exporter checked before it is written.

    {{ monitoring_dcgm_counters | vllm_fleet.fleet.dcgm_counter_problems }}

dcgm-exporter reads "FIELD, TYPE, HELP" lines; a field it does not know, a type other than gauge,
counter or label, or a comma in the help text (it splits on commas) stops it at start. GPU hosts
here have no GPU to run it on, so the file is checked where it is made.
"""

from __future__ import annotations

import re

FIELD = re.compile(r"^DCGM_(?:FI|EXP)_[A-Z0-9_]+$")
TYPES = ("gauge", "counter", "label")


def dcgm_counter_problems(counters: list[dict]) -> list[str]:
    problems = []
    seen: set[str] = set()
    for number, counter in enumerate(counters, start=1):
        field, kind, text = (str(counter.get(key, "")).strip() for key in ("field", "type", "help"))
        where = f"monitoring_dcgm_counters[{number}] ({field or 'no field'})"
        if not FIELD.match(field):
            problems.append(f"{where}: not a DCGM field name (DCGM_FI_...)")
        if kind not in TYPES:
            problems.append(f"{where}: type {kind!r} is not one of {', '.join(TYPES)}")
        if not text or "," in text:
            problems.append(f"{where}: the help text must be present and hold no comma")
        if field in seen:
            problems.append(f"{where}: listed twice")
        seen.add(field)
    return problems if counters else ["monitoring_dcgm_counters is empty"]


class FilterModule:
    def filters(self) -> dict:
        return {"dcgm_counter_problems": dcgm_counter_problems}
