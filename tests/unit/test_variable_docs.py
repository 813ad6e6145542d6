"""docs/variables.md is what `vllm-fleet variables` renders from the roles' argument specs and
defaults (regenerate it with `tools/vllm-fleet variables --out docs/variables.md`), and every
variable a role defaults is in one of its argument specs."""

from __future__ import annotations

import yaml

from tests.conftest import REPO_ROOT
from vllm_fleet import variables

ROLES = REPO_ROOT / "roles"


def test_the_variable_reference_is_generated_from_the_argument_specs():
    assert (REPO_ROOT / "docs" / "variables.md").read_text() == variables.render(ROLES), \
        "docs/variables.md is stale: run tools/vllm-fleet variables --out docs/variables.md"


def test_every_default_is_documented_in_an_argument_spec():
    for defaults_file in sorted(ROLES.glob("*/defaults/main.yml")):
        role = defaults_file.parent.parent
        specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        documented = {name for spec in specs.values() for name in (spec.get("options") or {})}
        assert set(yaml.safe_load(defaults_file.read_text()) or {}) <= documented, role.name


def test_a_default_too_long_for_the_table_points_to_its_file():
    row = next(line for line in variables.render(ROLES, ["python_env"]).splitlines()
               if line.startswith("| `python_env_profiles` |"))
    assert "see `roles/python_env/defaults/main.yml`" in row
