#!/usr/bin/python
"""Ansible module: check a placed model set against the manifest written when it was verified."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_integrity
short_description: Check that a placed model set is still what was verified
description:
  - Reads the manifest the model role wrote when it placed the set (each file's size and sha256) and
    hashes every file again, several at a time. A shard damaged on disk after the deploy (a flipped
    bit keeps its size and mtime) is found here, before a restart loads it.
  - Fails naming each missing, resized or changed file. Reads only; changes nothing.
options:
  path:
    description: The placed set, e.g. I(model_root)/I(name)/current.
    type: path
    required: true
  hash_workers:
    description: Files hashed at once.
    type: int
    default: 4
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Check the served model files against their manifest
  vllm_fleet.fleet.model_integrity:
    path: /var/lib/vllm-fleet/models/glm-5/current
"""

RETURN = r"""
files_checked: {description: Files the manifest lists., returned: always, type: int}
bytes_checked: {description: Bytes hashed., returned: always, type: int}
seconds: {description: Time the check took., returned: always, type: float}
problems: {description: One line per damaged file; empty when the set is intact., returned: always, type: list, elements: str}
"""

import time
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_store import damaged_files, read_manifest


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "hash_workers": {"type": "int", "default": 4},
        },
        supports_check_mode=True,
    )
    directory = Path(module.params["path"])
    started = time.monotonic()
    problems = damaged_files(directory, module.params["hash_workers"])
    files = (read_manifest(directory) or {}).get("files", {})
    result = {
        "changed": False,
        "files_checked": len(files),
        "bytes_checked": sum(entry["size"] for entry in files.values()),
        "seconds": round(time.monotonic() - started, 2),
        "problems": problems,
    }
    if problems:
        module.fail_json(msg=f"the model set {directory.resolve()} is not what was verified when it was placed: "
                             + "; ".join(problems) + ". A restart would load it: put the file back from the "
                             "model's source before restarting vLLM", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
