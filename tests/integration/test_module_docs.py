"""Every module's DOCUMENTATION, EXAMPLES and RETURN render with ansible-doc (valid YAML that
ansible-doc accepts), and the documented options are exactly the ones the module takes."""

from __future__ import annotations

import ast
import json

from tests.conftest import REPO_ROOT, run

COLLECTION = "vllm_fleet.fleet"
MODULES = sorted(path.stem for path in (REPO_ROOT / "plugins" / "modules").glob("*.py"))


def argument_spec_keys(module: str) -> set[str] | None:
    """The keys of the literal argument_spec dict the module passes to AnsibleModule."""
    tree = ast.parse((REPO_ROOT / "plugins" / "modules" / f"{module}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "argument_spec" and isinstance(node.value, ast.Dict):
            return {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
    return None


def test_every_module_renders_with_ansible_doc():
    done = run(["ansible-doc", "--json", *(f"{COLLECTION}.{module}" for module in MODULES)])
    assert done.returncode == 0, done.stderr[-3000:]
    docs = {name.removeprefix(f"{COLLECTION}."): doc for name, doc in json.loads(done.stdout).items()}
    assert sorted(docs) == MODULES
    for module, doc in docs.items():
        assert doc["doc"]["short_description"], module
        assert doc["examples"], f"{module} has no EXAMPLES"
        assert doc["return"] is not None, f"{module} has no RETURN"
        spec = argument_spec_keys(module)
        if spec is not None:
            assert set(doc["doc"].get("options") or {}) == spec, module
