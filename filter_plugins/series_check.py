"""dsa_series_problems: what patch series a DSA model lacks for the pinned versions (module_utils/series_check.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from module_utils.series_check import dsa_series_problems  # noqa: E402


class FilterModule:
    def filters(self) -> dict:
        return {"dsa_series_problems": dsa_series_problems}
