#!/usr/bin/python
"""Ansible module: decide the NVIDIA driver's kernel modules, branch, fabric manager and reboot."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_driver_policy
short_description: Check a requested NVIDIA driver set-up against the detected GPUs, decide reboots
description:
  - With I(compute_capabilities), picks the kernel-module flavour (open for compute capability
    10 or higher, which the proprietary modules do not support) and fails, naming the reason, when the
    requested flavour or I(branch) cannot drive these GPUs.
  - With I(reboot_policy), compares the loaded kernel module's version with the installed driver
    and returns C(action) reboot, none or fail; a loaded module that differs from the installed one
    (the NVML "Driver/library version mismatch") fails when the policy forbids a reboot.
  - Never changes anything.
options:
  compute_capabilities:
    description: Compute capabilities of the host's GPUs (e.g. 12.0).
    type: list
    elements: str
  architectures:
    description: Architectures of the host's GPUs (e.g. Blackwell).
    type: list
    elements: str
    default: []
  kernel_flavour:
    description: Requested kernel modules.
    type: str
    choices: [auto, open, proprietary]
    default: auto
  branch:
    description: Driver branch (e.g. 580).
    type: int
  topology_nvswitch:
    description: nvidia-smi topo found NVSwitch-connected GPUs.
    type: bool
    default: false
  fabric_states:
    description: Fabric states from nvidia-smi -q -x.
    type: list
    elements: str
    default: []
  reboot_policy:
    description: never, if_needed or always.
    type: str
    choices: [never, if_needed, always]
  loaded_version:
    description: Version of the kernel module in memory; empty when none is loaded.
    type: str
  installed_version:
    description: Version of the installed driver.
    type: str
  changed:
    description: Whether this run changed the driver.
    type: bool
    default: false
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Pick the kernel modules
  nvidia_driver_policy:
    compute_capabilities: ["12.0"]
    architectures: [Blackwell]
    kernel_flavour: auto
    branch: 580
"""

RETURN = r"""
kernel_flavour:
  description: open or proprietary (with compute_capabilities).
  returned: when compute_capabilities is given
  type: str
fabric_manager:
  description: Whether the fabric manager is needed (NVSwitch).
  returned: when compute_capabilities is given
  type: bool
action:
  description: none or reboot (with reboot_policy; fail ends the module).
  returned: when reboot_policy is given
  type: str
reason:
  description: Why a reboot is or would be needed; empty when none is.
  returned: when reboot_policy is given
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.nvidia_smi import (
    PolicyError, Topology, check_branch, fabric_manager_needed, kernel_flavour, reboot_action)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "compute_capabilities": {"type": "list", "elements": "str"},
            "architectures": {"type": "list", "elements": "str", "default": []},
            "kernel_flavour": {"type": "str", "choices": ["auto", "open", "proprietary"], "default": "auto"},
            "branch": {"type": "int"},
            "topology_nvswitch": {"type": "bool", "default": False},
            "fabric_states": {"type": "list", "elements": "str", "default": []},
            "reboot_policy": {"type": "str", "choices": ["never", "if_needed", "always"]},
            "loaded_version": {"type": "str"},
            "installed_version": {"type": "str"},
            "changed": {"type": "bool", "default": False},
        },
        required_one_of=[("compute_capabilities", "reboot_policy")],
        supports_check_mode=True,
    )
    p = module.params
    result: dict = {"changed": False}
    try:
        if p["compute_capabilities"] is not None:
            if not p["compute_capabilities"]:
                raise PolicyError("no NVIDIA GPU found: nothing to choose a driver for")
            result["kernel_flavour"] = kernel_flavour(p["compute_capabilities"], p["kernel_flavour"])
            if p["branch"] is not None:
                check_branch(p["branch"], p["architectures"])
            result["fabric_manager"] = fabric_manager_needed(Topology(nvswitch=p["topology_nvswitch"]), p["fabric_states"])
        if p["reboot_policy"]:
            decision = reboot_action(p["reboot_policy"], p["loaded_version"] or None, p["installed_version"] or None,
                                     p["changed"])
            if decision["action"] == "fail":
                module.fail_json(msg=decision["reason"], **result, **decision)
            result.update(decision)
    except PolicyError as error:
        module.fail_json(msg=str(error), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
