#!/usr/bin/python
"""Ansible module: check a GGUF model directory before it is placed."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gguf_model_check
short_description: Check a GGUF model directory (files, split set, config, tokenizer)
description:
  - Reads each GGUF header, checks that a split set (C(-NNNNN-of-NNNNN.gguf)) is complete and
    that C(config.json) and a tokenizer lie beside the GGUF, as vLLM needs them there.
  - Changes nothing; fails naming every problem it found.
  - Needs the C(gguf) Python package where it runs (the controller, with C(delegate_to)).
options:
  source_dir:
    description: Directory that holds the GGUF file(s), config.json and the tokenizer.
    type: path
    required: true
  gguf_files:
    description: GGUF file names inside I(source_dir); every shard of a split set.
    type: list
    elements: str
    required: true
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Check the model before placing it
  gguf_model_check:
    source_dir: /srv/models/glm-5
    gguf_files: [GLM-5-Q4_K_M-00001-of-00002.gguf, GLM-5-Q4_K_M-00002-of-00002.gguf]
  delegate_to: localhost
"""

RETURN = r"""
architecture:
  description: general.architecture of the GGUF files.
  returned: always
  type: str
  sample: qwen3
model_type:
  description: model_type from config.json.
  returned: always
  type: str
hf_files:
  description: config and tokenizer files found beside the GGUF, to place with it.
  returned: always
  type: list
  sample: [config.json, tokenizer.json, tokenizer_config.json]
gguf_files:
  description: name, size and architecture of each GGUF file.
  returned: always
  type: list
problems:
  description: what is wrong, one sentence each; empty when the directory is servable.
  returned: always
  type: list
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gguf_files import inspect_model_dir


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "source_dir": {"type": "path", "required": True},
            "gguf_files": {"type": "list", "elements": "str", "required": True},
        },
        supports_check_mode=True,
    )
    report = inspect_model_dir(module.params["source_dir"], module.params["gguf_files"]).as_dict()
    if report["problems"]:
        module.fail_json(msg="model check failed: " + "; ".join(report["problems"]), **report)
    module.exit_json(changed=False, **report)


if __name__ == "__main__":
    main()
