#!/usr/bin/python
"""Ansible module: check how a model profile describes its source, before any change."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_profile_check
short_description: Check a model profile's source description (source, shard list, URLs with sha256)
description:
  - Fails naming every problem, before anything is fetched or changed. Changes nothing.
  - The source needs its key (controller source_dir, url urls, hf hf_repo, local local_dir);
    gguf_files must be a complete C(-NNNNN-of-NNNNN) set; each URL needs a 64-digit sha256 and
    each GGUF file a URL.
options:
  source: {description: "controller, url, hf or local.", type: str, required: true}
  gguf_files: {description: Every shard of the set., type: list, elements: str, required: true}
  source_dir: {description: controller source directory., type: str, default: ""}
  urls: {description: "url source entries (url, sha256, name, size).", type: list, elements: dict, default: []}
  hf_repo: {description: hf source repository., type: str, default: ""}
  local_dir: {description: local source directory on the host., type: str, default: ""}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Check the model profile
  model_profile_check:
    source: url
    gguf_files: [m-00001-of-00002.gguf, m-00002-of-00002.gguf]
    urls:
      - {url: "https://mirror.example/m-00001-of-00002.gguf", sha256: "..."}
  delegate_to: localhost
"""

RETURN = r"""
problems:
  description: What is wrong, one sentence each; empty when the profile is usable.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_profile import profile_problems


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "source": {"type": "str", "required": True},
            "gguf_files": {"type": "list", "elements": "str", "required": True},
            "source_dir": {"type": "str", "default": ""},
            "urls": {"type": "list", "elements": "dict", "default": []},
            "hf_repo": {"type": "str", "default": ""},
            "local_dir": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    given = {"source_dir": params["source_dir"], "urls": params["urls"], "hf.repo": params["hf_repo"],
             "local_dir": params["local_dir"]}
    problems = profile_problems(params["source"], params["gguf_files"], given, params["urls"])
    if problems:
        module.fail_json(msg="model profile check failed: " + "; ".join(problems), problems=problems)
    module.exit_json(changed=False, problems=[])


if __name__ == "__main__":
    main()
