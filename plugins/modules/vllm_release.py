#!/usr/bin/python
"""Ansible module: switch, roll back, prune or describe the releases of a vLLM service."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_release
short_description: Switch the current release of a vLLM service, roll it back, prune old ones
description:
  - A release is a directory C(root/<id>/) with the service's environment file, a C(venv) link
    and a C(release.json) manifest; C(root/current) is the release the unit runs and
    C(root/previous) the one before, C(root/verified) the one that last passed the gate. Links are
    replaced atomically (rename).
  - C(switch) makes a release current (the old current becomes previous) after checking that its
    venv and model files exist. C(rollback) swaps current and previous, recording the reason in
    the release rolled back from. C(prune) removes the oldest releases beyond C(keep), never the
    current, previous or verified one; with C(envs_root) it then removes the patched venv clones
    there that no remaining release links (a directory the vllm role built, named after its
    pinned venv and carrying its mark; pinned venvs and anything else are never touched).
    C(mark_verified) points C(verified) at current (after the
    gate). C(info) changes nothing.
  - The service is not restarted here; the vllm_service role's restart chain does that.
options:
  root:
    description: Directory that holds the releases and the current/previous links.
    type: path
    required: true
  action:
    description: What to do.
    type: str
    choices: [switch, rollback, prune, mark_verified, info]
    default: info
  release:
    description: Release id to make current (action=switch).
    type: str
  reason:
    description: Why the current release is rolled back (action=rollback); kept in its FAILED mark.
    type: str
    default: ""
  allow_failed:
    description: Roll back to a previous release even when it carries a FAILED mark.
    type: bool
    default: false
  keep:
    description: How many releases prune keeps, current and previous included.
    type: int
    default: 3
  envs_root:
    description: Directory of the venvs (action=prune); patched clones in it that no release links are removed.
    type: path
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Serve the new release
  vllm_release:
    root: /opt/vllm-fleet/releases
    action: switch
    release: 3f2a9c01b7de

- name: Go back to what worked
  vllm_release:
    root: /opt/vllm-fleet/releases
    action: rollback
    reason: "readiness gate: engine core initialization failed"
"""

RETURN = r"""
current:
  description: Release id current after the action.
  returned: always
  type: str
previous:
  description: Release id previous after the action.
  returned: always
  type: str
verified:
  description: Release id that last passed the gate (null when none has).
  returned: always
  type: str
unverified:
  description: Whether current is not the verified release (the next run restarts and gates it).
  returned: always
  type: bool
rolled_back_from:
  description: The release that was current before a rollback.
  returned: action=rollback
  type: str
removed:
  description: Release ids removed by prune.
  returned: action=prune
  type: list
removed_envs:
  description: Patched venv clones removed by prune (envs_root given).
  returned: action=prune
  type: list
current_manifest:
  description: The release.json of the release current after the action ({} when none).
  returned: always
  type: dict
releases:
  description: Every release (id, path, created, failed reason, manifest), oldest first.
  returned: always
  type: list
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import unlinked_clones
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.releases import (
    ReleaseError, described, linked_venvs, mark_verified, prune, remove_tree, rollback, state, switch,
)


def prune_releases_and_clones(root: Path, keep: int, envs_root: str | None, check_mode: bool) -> dict:
    outcome = prune(root, keep, dry_run=check_mode)
    if envs_root:
        linked = linked_venvs(root, ignoring=frozenset(outcome["removed"]))
        clones = unlinked_clones(Path(envs_root), linked)
        if not check_mode:
            for clone in clones:
                remove_tree(clone)
        outcome = {**outcome, "changed": outcome["changed"] or bool(clones), "removed_envs": [str(c) for c in clones]}
    return outcome


def act(params: dict, check_mode: bool) -> dict:
    root = Path(params["root"])
    if params["action"] == "switch":
        if not params["release"]:
            raise ReleaseError("action=switch needs release")
        return switch(root, params["release"], dry_run=check_mode)
    if params["action"] == "rollback":
        return rollback(root, params["reason"], dry_run=check_mode, allow_failed=params["allow_failed"])
    if params["action"] == "prune":
        return prune_releases_and_clones(root, params["keep"], params["envs_root"], check_mode)
    if params["action"] == "mark_verified":
        return mark_verified(root, dry_run=check_mode)
    return {"changed": False}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "action": {"type": "str", "choices": ["switch", "rollback", "prune", "mark_verified", "info"], "default": "info"},
            "release": {"type": "str"},
            "reason": {"type": "str", "default": ""},
            "keep": {"type": "int", "default": 3},
            "allow_failed": {"type": "bool", "default": False},
            "envs_root": {"type": "path"},
        },
        supports_check_mode=True,
    )
    try:
        outcome = act(module.params, module.check_mode)
    except ReleaseError as error:
        module.fail_json(msg=str(error), **state(Path(module.params["root"])))
    module.exit_json(**described(Path(module.params["root"]), outcome))


if __name__ == "__main__":
    main()
