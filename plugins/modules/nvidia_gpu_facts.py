#!/usr/bin/python
"""Ansible module: what the host's NVIDIA GPUs are, from sysfs and nvidia-smi."""

from __future__ import annotations

DOCUMENTATION = r"""
module: nvidia_gpu_facts
short_description: NVIDIA GPU facts from sysfs (before a driver exists) and nvidia-smi (after)
description:
  - Scans I(sysfs_root)/bus/pci/devices for NVIDIA display controllers and maps their device ids
    to an architecture and compute capability; this works before any driver is installed.
  - Where nvidia-smi exists, reads C(nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv),
    C(nvidia-smi -q -x) (CUDA version, architecture, persistence mode, fabric state) and
    C(nvidia-smi topo -m) (PCIe/NVLink matrix, NVSwitch) and C(nvidia-smi topo -p2p r) (peer access).
  - Reports the "Driver/library version mismatch" error of nvidia-smi and the version of the kernel
    module in memory (I(loaded_version_path)).
  - Never changes anything; returns the facts as C(nvidia_gpu).
options:
  nvidia_smi:
    description: nvidia-smi program (name on PATH or path).
    type: str
    default: nvidia-smi
  sysfs_root:
    description: Root of sysfs (tests point it at a recorded tree).
    type: path
    default: /sys
  loaded_version_path:
    description: File that holds the loaded kernel module's version.
    type: path
    default: /sys/module/nvidia/version
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Read the GPUs
  nvidia_gpu_facts:
  register: gpus
"""

RETURN = r"""
nvidia_gpu:
  description: >-
    pci_gpus (address, device_id, architecture, compute_capability); nvidia_smi (found or not);
    gpus (index, name, compute_capability, memory_total_mib, driver_version); count; names;
    compute_capabilities; architectures; driver_version; cuda_version; persistence_mode (all GPUs
    enabled); topology (links, cpu_affinity, numa_affinity, nvlink, nvswitch) or null; p2p (each GPU's
    peer read-access state to each other GPU, from C(nvidia-smi topo -p2p r)) or null;
    fabric_states; nvml_mismatch (message, library_version) or null; loaded_module_version; warnings.
  returned: always
  type: dict
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.nvidia_smi import (
    QUERY_FIELDS,
    nvml_mismatch,
    parse_query_csv,
    parse_query_xml,
    parse_p2p,
    parse_topology,
    read_loaded_module_version,
    scan_pci_gpus,
)


def smi_facts(module: AnsibleModule, smi: str) -> dict:
    facts: dict = {"warnings": []}
    rc, out, err = module.run_command([smi, f"--query-gpu={QUERY_FIELDS}", "--format=csv"])
    mismatch = nvml_mismatch(out + err)
    facts["nvml_mismatch"] = mismatch
    if mismatch:
        return facts
    if rc != 0:
        module.fail_json(msg=f"{smi} --query-gpu failed (rc {rc}): {(err or out).strip()}", rc=rc, stdout=out, stderr=err)
    rows = parse_query_csv(out)
    facts["gpus"] = [{"index": int(row["index"]), "name": row["name"], "compute_capability": row["compute_cap"],
                      "memory_total_mib": int(row["memory.total"].split()[0]), "driver_version": row["driver_version"]}
                     for row in rows]
    rc, out, err = module.run_command([smi, "-q", "-x"])
    if rc == 0:
        xml = parse_query_xml(out)
        facts["cuda_version"] = xml["cuda_version"]
        facts["architectures"] = sorted({gpu["architecture"] for gpu in xml["gpus"] if gpu["architecture"]})
        facts["persistence_mode"] = all(gpu["persistence_mode"] for gpu in xml["gpus"])
        facts["fabric_states"] = [gpu["fabric_state"] for gpu in xml["gpus"]]
    else:
        facts["warnings"].append(f"{smi} -q -x failed (rc {rc}): {(err or out).strip()}")
    rc, out, err = module.run_command([smi, "topo", "-m"])
    if rc == 0:
        facts["topology"] = parse_topology(out).as_dict()
    else:
        facts["warnings"].append(f"{smi} topo -m failed (rc {rc}): {(err or out).strip()}")
    rc, out, err = module.run_command([smi, "topo", "-p2p", "r"])
    if rc == 0 and len(facts["gpus"]) > 1:
        facts["p2p"] = parse_p2p(out)
    elif rc != 0:
        facts["warnings"].append(f"{smi} topo -p2p r failed (rc {rc}): {(err or out).strip()}")
    return facts


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "loaded_version_path": {"type": "path", "default": "/sys/module/nvidia/version"},
        },
        supports_check_mode=True,
    )
    pci = [vars(gpu) for gpu in scan_pci_gpus(Path(module.params["sysfs_root"]))]
    facts: dict = {"pci_gpus": pci, "gpus": [], "cuda_version": None, "architectures": [], "persistence_mode": None,
                   "topology": None, "p2p": None, "fabric_states": [], "nvml_mismatch": None, "warnings": [],
                   "loaded_module_version": read_loaded_module_version(Path(module.params["loaded_version_path"]))}
    smi = module.get_bin_path(module.params["nvidia_smi"])
    facts["nvidia_smi"] = bool(smi)
    if smi:
        facts.update(smi_facts(module, smi))
    facts["count"] = len(facts["gpus"]) or len(pci)
    facts["names"] = sorted({gpu["name"] for gpu in facts["gpus"]})
    facts["compute_capabilities"] = sorted({gpu["compute_capability"] for gpu in facts["gpus"] or pci
                                            if gpu["compute_capability"]})
    if not facts["architectures"]:
        facts["architectures"] = sorted({gpu["architecture"] for gpu in pci if gpu["architecture"]})
    facts["driver_version"] = facts["gpus"][0]["driver_version"] if facts["gpus"] else None
    for warning in facts["warnings"]:
        module.warn(warning)
    module.exit_json(changed=False, nvidia_gpu=facts)


if __name__ == "__main__":
    main()
