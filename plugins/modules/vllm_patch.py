#!/usr/bin/python
"""Ansible module: the venv a model runs in, its patch series applied to a clone of the pinned venv."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_patch
short_description: The venv a model runs in, with its patch series applied to a clone of the pinned venv
description:
  - For each distribution installed in the pinned venv I(env), reads its version and loads
    I(series_root)/<distribution>/<version>/series; a version without a series is refused with a
    clear error.
  - With no series to apply, returns the pinned venv itself. Otherwise returns I(clone), a clone
    of it (named by the role after the series set), made of hard links and patched with GNU patch
    (all or nothing per series, replacing files rather than writing into them), so the pinned venv
    and every other clone stay byte for byte as they were and a release that links one of them
    runs exactly that code.
  - The clone is built under a staging name and renamed when complete; an interrupted build is
    started over by the next run. A clone that is present with the same series is left alone.
  - Series that an earlier version of this module applied to the pinned venv in place are taken
    back out of it.
  - Check mode reports what would change.
options:
  env:
    description: The pinned venv (python_env's).
    type: path
    required: true
  clone:
    description: Where the patched clone lives (beside I(env); one per series set).
    type: path
    required: true
  series_root:
    description: Directory holding <distribution>/<version>/series and the patches.
    type: path
    required: true
  distributions:
    description: Distributions to patch; one not installed in the venv is skipped.
    type: list
    elements: str
    required: true
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: The venv for GLM-5, patched
  vllm_patch:
    env: /opt/vllm-fleet/envs/vllm-cuda-0123456789
    clone: /opt/vllm-fleet/envs/vllm-cuda-0123456789-p3f2a9c0d1e4
    series_root: /opt/vllm-fleet/patches
    distributions: [vllm-gguf-plugin, vllm]
  register: patched
"""

RETURN = r"""
env:
  description: The venv to run (the pinned one, or its patched clone).
  returned: success
  type: str
  sample: /opt/vllm-fleet/envs/vllm-cuda-0123456789-p3f2a9c0d1e4b
action:
  description: pinned venv, pinned venv restored, present, built or would build.
  returned: success
  type: str
results:
  description: Per series applied in this run, version, series_id, action and the files patched.
  returned: success
  type: list
series_ids:
  description: The series the venv carries, one id each (for cache keys).
  returned: success
  type: list
  sample: [vllm-gguf-plugin-0.0.5-3f2a9c0d1e4b]
not_installed:
  description: Distributions not installed in this venv.
  returned: success
  type: list
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import PatchError, patched_env


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "env": {"type": "path", "required": True},
            "clone": {"type": "path", "required": True},
            "series_root": {"type": "path", "required": True},
            "distributions": {"type": "list", "elements": "str", "required": True},
        },
        supports_check_mode=True,
    )
    if module.params["distributions"] and module.get_bin_path("patch") is None:
        module.fail_json(msg="GNU patch is not installed on this host (Debian package 'patch')")
    try:
        result = patched_env(Path(module.params["env"]), Path(module.params["clone"]), Path(module.params["series_root"]),
                             module.params["distributions"], check_mode=module.check_mode)
    except PatchError as error:
        module.fail_json(msg=str(error))
    module.exit_json(**result.as_dict())


if __name__ == "__main__":
    main()
