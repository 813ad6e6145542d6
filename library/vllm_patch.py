#!/usr/bin/python
"""Ansible module: apply the patch series of installed packages, all or nothing, idempotently."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_patch
short_description: Apply patch series to packages installed in a venv, all or nothing
description:
  - For each distribution, reads its installed version from site-packages and applies
    I(series_root)/<distribution>/<version>/series with GNU patch to a scratch copy first; only a
    series that applied completely is moved into site-packages.
  - Idempotent (an applied series is detected by a reverse dry run and recorded in
    site-packages/vllm-fleet-patches.json); a different series of the same version replaces the
    recorded one; a version without a series is refused with a clear error.
  - Check mode reports what would change.
options:
  site_packages:
    description: The venv's site-packages directory.
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
author: vllm-fleet
"""

EXAMPLES = r"""
- name: Patch the GGUF plugin for GLM-5
  vllm_patch:
    site_packages: /opt/vllm-fleet/envs/vllm-cuda-0123456789/lib/python3.12/site-packages
    series_root: /opt/vllm-fleet/patches
    distributions: [vllm-gguf-plugin, vllm]
"""

RETURN = r"""
results:
  description: Per distribution, version, series_id, changed, action and the files patched.
  returned: success
  type: list
series_ids:
  description: The applied series, one id each (for cache keys).
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
from ansible.module_utils.patch_series import PatchError, apply_series, installed_version


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "site_packages": {"type": "path", "required": True},
            "series_root": {"type": "path", "required": True},
            "distributions": {"type": "list", "elements": "str", "required": True},
        },
        supports_check_mode=True,
    )
    site = Path(module.params["site_packages"])
    root = Path(module.params["series_root"])
    if module.get_bin_path("patch") is None:
        module.fail_json(msg="GNU patch is not installed on this host (Debian package 'patch')")
    results, not_installed = [], []
    for distribution in module.params["distributions"]:
        if installed_version(site, distribution) is None:
            not_installed.append(distribution)
            continue
        try:
            results.append(apply_series(site, root, distribution, check_mode=module.check_mode).as_dict())
        except PatchError as error:
            module.fail_json(msg=f"{distribution}: {error}", results=results)
    module.exit_json(changed=any(r["changed"] for r in results), results=results,
                     series_ids=[r["series_id"] for r in results], not_installed=not_installed)


if __name__ == "__main__":
    main()
