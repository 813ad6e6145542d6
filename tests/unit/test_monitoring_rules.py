"""The monitoring role's Prometheus rules, rendered with the role's defaults, through promtool: they
load (check rules) and fire when they should and only then (test rules, tests/prometheus/)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import regex_replace

from tests.conftest import REPO_ROOT

ROLE = REPO_ROOT / "roles" / "monitoring"
# tools/bootstrap.sh --test-images puts it in the checkout; ansible-test units (a copy of the
# collection) finds it on PATH (tests/integration/test_ansible_test.py).
PROMTOOL = REPO_ROOT / ".cache" / "tools" / "promtool"
# What the rules need beyond the role's own defaults: the unit name and the flagship's floor.
INVENTORY = {"monitoring_vllm_unit": "vllm.service", "monitoring_min_decode_tok_s": 45}


def render_template(name: str, overrides: dict) -> str:
    """A template of the role, with the role's plain defaults (not the ones that are expressions)."""
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values = {**{k: v for k, v in defaults.items() if "{{" not in str(v)}, **overrides}
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["regex_replace"] = regex_replace
    return environment.from_string((ROLE / "templates" / name).read_text()).render(**values)


def render_rules(overrides: dict) -> str:
    return render_template("vllm-fleet.rules.yml.j2", overrides)


def promtool(*args: str) -> subprocess.CompletedProcess:
    program = str(PROMTOOL) if PROMTOOL.exists() else shutil.which("promtool")
    if not program:
        pytest.fail(f"{PROMTOOL} is missing (and no promtool on PATH): run tools/bootstrap.sh --test-images")
    return subprocess.run([program, *args], capture_output=True, text=True, check=False)


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    (tmp_path / "vllm-fleet.rules.yml").write_text(render_rules(INVENTORY))
    shutil.copy(REPO_ROOT / "tests" / "prometheus" / "rules_test.yml", tmp_path)
    return tmp_path


def test_rules_load(rules_dir: Path):
    checked = promtool("check", "rules", str(rules_dir / "vllm-fleet.rules.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 14 rules found" in checked.stdout


def test_rules_fire_when_they_should(rules_dir: Path):
    tested = promtool("test", "rules", str(rules_dir / "rules_test.yml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_a_broken_threshold_fails_the_rule_tests(rules_dir: Path):
    """The tests hold the thresholds: a crash-loop alert that needs 4 restarts fails them."""
    (rules_dir / "vllm-fleet.rules.yml").write_text(render_rules({**INVENTORY, "monitoring_crash_loop_restarts": 4}))
    tested = promtool("test", "rules", str(rules_dir / "rules_test.yml"))
    assert tested.returncode != 0 and "VllmCrashLooping" in tested.stdout + tested.stderr


def test_without_a_floor_there_is_no_decode_alert():
    rules = yaml.safe_load(render_rules({**INVENTORY, "monitoring_min_decode_tok_s": 0}))
    alerts = [rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    assert "VllmDecodeBelowFloor" not in alerts and "VllmCrashLooping" in alerts


def test_dcgm_counters_are_checked_before_they_are_written():
    from ansible_collections.vllm_fleet.fleet.plugins.filter.dcgm_counters import dcgm_counter_problems

    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["monitoring_dcgm_counters"]
    assert dcgm_counter_problems(defaults) == []
    bad = [{"field": "GPU_UTIL", "type": "gauge", "help": "x"},
           {"field": "DCGM_FI_DEV_FB_USED", "type": "histogram", "help": "used, in MiB"},
           {"field": "DCGM_FI_DEV_FB_USED", "type": "gauge", "help": "again"}]
    assert dcgm_counter_problems(bad) == [
        "monitoring_dcgm_counters[1] (GPU_UTIL): not a DCGM field name (DCGM_FI_...)",
        "monitoring_dcgm_counters[2] (DCGM_FI_DEV_FB_USED): type 'histogram' is not one of gauge, counter, label",
        "monitoring_dcgm_counters[2] (DCGM_FI_DEV_FB_USED): the help text must be present and hold no comma",
        "monitoring_dcgm_counters[3] (DCGM_FI_DEV_FB_USED): listed twice",
    ]
