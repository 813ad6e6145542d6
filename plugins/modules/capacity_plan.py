#!/usr/bin/python
"""Ansible module: will the model fit these GPUs at this layout (the planner of `vllm-fleet plan`)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: capacity_plan
short_description: Weights per GPU, KV-cache tokens, largest context and decode roofline for a layout
description:
  - The capacity planner of C(vllm-fleet plan) (docs/planner.md) as a module - the preflight runs it on
    the controller, where the model's GGUF files or its config.json are, with the GPUs a host reported.
  - Reads GGUF metadata and tensor sizes across all shards (run it with a Python that has gguf), or
    config.json dims with a quant type for every matrix.
  - Returns the plan and go / no-go; each no-go names the fix. Never fails on a no-go (the caller
    decides) and changes nothing.
options:
  gguf: {description: The model's GGUF files (one shard names the split set)., type: list, elements: path}
  config: {description: HF config.json of the model (with I(quant))., type: path}
  quant: {description: "With I(config): the GGUF type of every matrix (Q4_K, Q8_0, BF16, ...).", type: str}
  gpus: {description: GPUs on the host., type: int, required: true}
  gpu_memory_gib: {description: Memory of one GPU in GiB., type: float, required: true}
  gpu_name: {description: GPU name as nvidia-smi prints it (bandwidth and compute capability)., type: str, default: ""}
  tensor_parallel_size: {description: Tensor-parallel size., type: int, default: 1}
  pipeline_parallel_size: {description: Pipeline-parallel size., type: int, default: 1}
  max_model_len: {description: Context length to serve., type: int, required: true}
  gpu_memory_utilization: {description: Share of each GPU's memory vLLM may use., type: float, default: 0.9}
  dsa_attention: {description: DSA attention mode as the service asks for it., type: str, default: auto, choices: [auto, dense, sparse]}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Plan GLM-5 Q4_K on this host's GPUs
  vllm_fleet.fleet.capacity_plan:
    gguf: [/srv/models/GLM-5-GGUF/Q4_K_M/GLM-5-Q4_K_M-00001-of-00009.gguf]
    gpus: 8
    gpu_memory_gib: 95.6
    gpu_name: NVIDIA RTX PRO 6000 Blackwell Server Edition
    tensor_parallel_size: 8
    max_model_len: 32768
    gpu_memory_utilization: 0.92
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
go: {description: Whether the layout fits., returned: success, type: bool}
no_go: {description: "Why not, each with its fix.", returned: success, type: list, elements: str}
plan:
  description: >-
    The planner's figures (weight_bytes, weight_bytes_per_gpu, kv_bytes_per_token, kv_cache_tokens,
    max_model_len_fit, max_concurrency, decode_bytes_per_token, roofline_tok_s_tp_aware, notes, ...).
  returned: success
  type: dict
dsa_attention: {description: "The DSA mode the plan assumed, or null for a model without DSA.", returned: success, type: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.dsa_policy import PolicyError
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.planner import Layout, plan_for


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "gguf": {"type": "list", "elements": "path"},
            "config": {"type": "path"},
            "quant": {"type": "str"},
            "gpus": {"type": "int", "required": True},
            "gpu_memory_gib": {"type": "float", "required": True},
            "gpu_name": {"type": "str", "default": ""},
            "tensor_parallel_size": {"type": "int", "default": 1},
            "pipeline_parallel_size": {"type": "int", "default": 1},
            "max_model_len": {"type": "int", "required": True},
            "gpu_memory_utilization": {"type": "float", "default": 0.9},
            "dsa_attention": {"type": "str", "default": "auto", "choices": ["auto", "dense", "sparse"]},
        },
        mutually_exclusive=[("gguf", "config")],
        required_one_of=[("gguf", "config")],
        required_together=[("config", "quant")],
        supports_check_mode=True,
    )
    params = module.params
    layout = Layout(gpus=params["gpus"], gpu_memory_gib=params["gpu_memory_gib"], tp=params["tensor_parallel_size"],
                    pp=params["pipeline_parallel_size"], max_model_len=params["max_model_len"],
                    gpu_memory_utilization=params["gpu_memory_utilization"], gpu_name=params["gpu_name"])
    try:
        plan, dsa = plan_for(layout, params["dsa_attention"], gguf=params["gguf"], config=params["config"],
                             quant=params["quant"])
    except PolicyError as error:
        module.fail_json(msg=f"capacity plan: {error}")
    except (OSError, ValueError, KeyError) as error:
        module.fail_json(msg=f"capacity plan: cannot read the model: {error}")
    module.exit_json(changed=False, go=plan.go, no_go=plan.no_go, plan=plan.as_dict(),
                     dsa_attention=dsa.mode if dsa else None)


if __name__ == "__main__":
    main()
