"""ansible-lint with the production profile and no skip_list; ruff on the Python."""

from __future__ import annotations

from tests.conftest import REPO_ROOT, run


def test_ansible_lint_production_profile():
    config = (REPO_ROOT / ".ansible-lint").read_text()
    assert "profile: production" in config and "skip_list" not in config
    result = run(["ansible-lint", "--offline", "--nocolor"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Profile 'production' was required, and it passed" in result.stdout + result.stderr


def test_playbooks_pass_syntax_check():
    for playbook in ("site.yml", "playbooks/deploy.yml", "playbooks/verify.yml"):
        result = run(["ansible-playbook", "--syntax-check", playbook])
        assert result.returncode == 0, result.stdout + result.stderr
    result = run(["ansible-playbook", "--syntax-check", "-i", "inventory/example-blackwell", "site.yml"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_on_the_python():
    config = (REPO_ROOT / "pyproject.toml").read_text()
    assert '[tool.ruff.lint]\nselect = ["E4", "E7", "E9", "F", "B"]' in config
    result = run(["ruff", "check", "--no-cache", "."])
    assert result.returncode == 0, result.stdout + result.stderr
