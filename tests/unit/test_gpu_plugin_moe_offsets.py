"""Plugin patch 0007: every fused-MoE Triton kernel of vllm-gguf-plugin 0.0.5 takes the expert's
weight offset in 64 bits (GLM-5-sized expert tensors pass 2 GiB; int32 wrapped and crashed on GPU)."""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
from tests.unit.test_patch_series_real import find_wheel, pristine_site, PATCHES

EXPERT_LOAD = re.compile(r"^\s*expert = tl\.load\(expert_ids_ptr \+ pid_m\)(?P<cast>\.to\(tl\.int64\))?$", re.M)


def kernels_loading_an_expert_id(names: list[str]) -> set[str]:
    return {n for n in names if n.startswith("vllm_gguf_plugin/triton/fused_moe/") and n.endswith(".py")}


@pytest.mark.slow
def test_every_fused_moe_kernel_widens_the_expert_id(tmp_path: Path):
    wheel = zipfile.ZipFile(find_wheel("vllm-gguf-plugin", "0.0.5"))
    pristine = {n: wheel.read(n).decode() for n in kernels_loading_an_expert_id(wheel.namelist())}
    loading = {n for n, text in pristine.items() if EXPERT_LOAD.search(text)}
    assert len(loading) == 20, sorted(loading)  # one kernel per quant type the plugin's MoE supports
    assert all(not m["cast"] for n in loading for m in EXPERT_LOAD.finditer(pristine[n]))

    site = pristine_site(tmp_path, "vllm-gguf-plugin", "0.0.5")
    apply_series(site, PATCHES, "vllm-gguf-plugin")
    for name in loading:
        patched = (site / name).read_text()
        loads = list(EXPERT_LOAD.finditer(patched))
        assert loads and all(m["cast"] for m in loads), f"{name} still loads the expert id as int32"
