#!/usr/bin/python
"""Ansible module: prove a vLLM server answers real completions and measure its tok/s."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_probe
short_description: Prove a vLLM server answers real completions; measure output tok/s
description:
  - Waits for C(/health), checks that C(/v1/models) lists the model, sends each prompt as a
    completion (temperature 0) with the OpenAI client and fails on an empty answer.
  - Output tokens per second come from C(usage.completion_tokens) over the request time.
  - Changes nothing. Needs the C(openai) package where it runs (the controller).
options:
  base_url:
    description: OpenAI API base URL, ending in /v1.
    type: str
    required: true
  model:
    description: Served model name to ask for.
    type: str
    required: true
  api_key:
    description: Bearer token, when the server requires one.
    type: str
    default: ""
    no_log: true
  prompts:
    description: Prompts sent one after another.
    type: list
    elements: str
    default: ["The capital of France is"]
  max_tokens:
    description: max_tokens of each completion.
    type: int
    default: 64
  health_timeout:
    description: Seconds to wait for /health to answer 200.
    type: float
    default: 300
  request_timeout:
    description: Seconds one request may take.
    type: float
    default: 120
author: vllm-fleet
"""

EXAMPLES = r"""
- name: Prove the service answers
  vllm_probe:
    base_url: http://10.0.0.5:8000/v1
    model: glm-5
    api_key: "{{ vault_vllm_api_key }}"
  delegate_to: localhost
"""

RETURN = r"""
served_models:
  description: Model ids /v1/models listed.
  returned: success
  type: list
samples:
  description: Per prompt, the text, completion_tokens, seconds, tokens_per_second, finish_reason.
  returned: success
  type: list
completion_tokens:
  description: Output tokens over all samples.
  returned: success
  type: int
tokens_per_second:
  description: Output tokens per second over all samples, single stream.
  returned: success
  type: float
  sample: 812.4
health_wait_seconds:
  description: Seconds until /health answered.
  returned: success
  type: float
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_probe import ProbeError, probe_service


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "base_url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "prompts": {"type": "list", "elements": "str", "default": ["The capital of France is"]},
            "max_tokens": {"type": "int", "default": 64},
            "health_timeout": {"type": "float", "default": 300.0},
            "request_timeout": {"type": "float", "default": 120.0},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = probe_service(
            base_url=params["base_url"],
            model=params["model"],
            prompts=params["prompts"],
            max_tokens=params["max_tokens"],
            api_key=params["api_key"],
            health_timeout=params["health_timeout"],
            request_timeout=params["request_timeout"],
        )
    except ProbeError as error:
        module.fail_json(msg=str(error))
    except Exception as error:  # the client's own errors: connection, HTTP status, timeouts
        module.fail_json(msg=f"{type(error).__name__} talking to {params['base_url']}: {error}")
    module.exit_json(changed=False, **result.as_dict())


if __name__ == "__main__":
    main()
