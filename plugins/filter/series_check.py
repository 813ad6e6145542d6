"""dsa_series_problems: what patch series a DSA model lacks for the pinned versions (plugins/module_utils/series_check.py)."""

from __future__ import annotations

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.series_check import dsa_series_problems


class FilterModule:
    def filters(self) -> dict:
        return {"dsa_series_problems": dsa_series_problems}
