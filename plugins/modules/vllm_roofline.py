#!/usr/bin/python
"""Ansible module: the bandwidth-bound single-stream decode ceiling of the GGUF a host serves."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_roofline
short_description: Bandwidth-bound decode ceiling from a GGUF's tensor sizes and the GPUs' memory bandwidth
description:
  - Reads every shard of the GGUF with the gguf reader (run it with the model venv's Python, which has
    gguf) and sums the bytes one decode step touches - dense tensors, the output head, one embedding row,
    and of the expert tensors only expert_used_count of expert_count.
  - Takes the memory bandwidth from I(memory_bandwidth_gbs), else from a table by the GPU name that
    nvidia-smi prints. Without either (a CPU host) the ceiling is null and the reason is returned.
  - Reads only; changes nothing.
options:
  gguf_path: {description: The GGUF file or the first shard of a split set., type: path, required: true}
  num_gpus: {description: GPUs the weights are spread over (tensor x pipeline parallel)., type: int, default: 1}
  memory_bandwidth_gbs: {description: Per-GPU (or CPU socket) memory bandwidth in GB/s; overrides the table., type: float}
  gpu_name: {description: GPU name as nvidia-smi prints it; asked from nvidia-smi when not given., type: str}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Decode ceiling of the served model
  vllm_roofline:
    gguf_path: /var/lib/vllm-fleet/models/glm-5/current/GLM-5-UD-Q4_K_XL-00001-of-00009.gguf
    num_gpus: 8
  vars:
    ansible_python_interpreter: "{{ python_env_python }}"
"""

RETURN = r"""
bytes_per_token: {description: Weight bytes one decode step reads., returned: success, type: int}
total_bytes: {description: All tensor bytes of the model., returned: success, type: int}
expert_count: {description: Experts per MoE layer (0 for a dense model)., returned: success, type: int}
expert_used: {description: Experts the router picks per token., returned: success, type: int}
bandwidth_gbs: {description: "Per-GPU bandwidth used, or null.", returned: success, type: float}
bandwidth_source: {description: "Where the bandwidth came from, or why there is none.", returned: success, type: str}
ceiling_tok_s: {description: "Bandwidth-bound single-stream tok/s, or null.", returned: success, type: float}
"""

import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.roofline import roofline_for


def nvidia_smi_gpu_name(module: AnsibleModule) -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    rc, out, _err = module.run_command(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    names = [line.strip() for line in out.splitlines() if line.strip()]
    return names[0] if rc == 0 and names else None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "gguf_path": {"type": "path", "required": True},
            "num_gpus": {"type": "int", "default": 1},
            "memory_bandwidth_gbs": {"type": "float"},
            "gpu_name": {"type": "str"},
        },
        supports_check_mode=True,
    )
    params = module.params
    gpu_name = params["gpu_name"] or nvidia_smi_gpu_name(module)
    try:
        roofline = roofline_for(params["gguf_path"], params["num_gpus"], gpu_name, params["memory_bandwidth_gbs"])
    except (OSError, ValueError) as error:
        module.fail_json(msg=f"cannot read {params['gguf_path']}: {error}")
    module.exit_json(changed=False, gpu_name=gpu_name, **roofline.as_dict())


if __name__ == "__main__":
    main()
