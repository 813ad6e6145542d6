#!/usr/bin/python
"""Ansible module: read a vLLM host before any change and judge it go / no-go."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_preflight
short_description: Go / no-go for a vLLM host, read before anything is changed on it
description:
  - Reads /dev/shm (free room counted as a start finds it, free plus the service user's own files),
    the free disk under the model store against the model set still to be placed, who listens on the
    service port (a process of the service's own unit or account is fine), the Python the environment will be
    built with, the kernel's fs.nr_open against the unit's LimitNOFILE, the IOMMU mode (kernel
    command line and IOMMU groups) and the NUMA nodes.
  - With I(gpu) (the C(nvidia_gpu) result of nvidia_gpu_facts) it also judges the GPUs, count against
    tensor x pipeline parallelism, the installed driver (or the branch that will be installed) against
    the vLLM wheel's CUDA, peer-to-peer access and the IOMMU hang on PCIe GPUs.
  - Returns problems as C(no_go) (each names the figures and a fix) and C(cautions) (shown as warnings); it never fails on
    them and never changes anything.
options:
  checks:
    description: What to read; C(shm) alone is what the restart tasks use.
    type: list
    elements: str
    choices: [shm, disk, port, python, limits, platform, gpu]
    default: [shm, disk, port, python, limits, platform, gpu]
  shm_path: {description: Shared memory mount., type: path, default: /dev/shm}
  service_user: {description: The account vLLM runs as; its files in /dev/shm go with a stop., type: str, default: vllm}
  min_shm_mib: {description: Room vLLM needs in /dev/shm., type: int, default: 512}
  port: {description: TCP port vLLM listens on., type: int, default: 8000}
  service_unit: {description: The systemd unit whose processes may hold the port., type: str, default: vllm.service}
  python: {description: Interpreter the vLLM environment is built with (name on PATH or path)., type: str, default: python3}
  python_min: {description: Oldest Python the pinned vLLM supports., type: str, default: "3.10"}
  python_max: {description: Newest Python the pinned vLLM supports., type: str, default: "3.13"}
  limit_nofile: {description: The unit's LimitNOFILE., type: int, default: 65536}
  model_current:
    description: The model store's C(current) directory of this model (files already there count as placed).
    type: path
  model_sizes:
    description: Size in bytes of each file of the model set, by file name; empty when unknown.
    type: dict
    default: {}
  model_margin_mib: {description: Free space to leave after the model set is placed., type: int, default: 1024}
  tensor_parallel_size: {description: GPUs per pipeline stage., type: int, default: 1}
  pipeline_parallel_size: {description: Pipeline stages., type: int, default: 1}
  gpu: {description: The C(nvidia_gpu) result of nvidia_gpu_facts; judged when C(gpu) is in I(checks)., type: dict}
  wheel_cuda: {description: "CUDA version the vLLM wheel is built for (for example 13.0); empty for none.", type: str, default: ""}
  planned_driver_branch: {description: Driver branch gpu_host.yml installs where no driver is installed yet., type: int}
  proc_root: {description: Root of procfs (tests point it elsewhere)., type: path, default: /proc}
  sysfs_root: {description: Root of sysfs (tests point it elsewhere)., type: path, default: /sys}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Read the host before any change
  vllm_fleet.fleet.host_preflight:
    port: 8000
    min_shm_mib: 1024
    model_current: /var/lib/vllm-fleet/models/glm-5-q4/current
    model_sizes: {GLM-5-Q4_K_M-00001-of-00009.gguf: 47244640256}
    tensor_parallel_size: 8
    gpu: "{{ gpus.nvidia_gpu }}"
    wheel_cuda: "13.0"
  register: preflight

- name: Room in /dev/shm for the next start
  vllm_fleet.fleet.host_preflight:
    checks: [shm]
    service_user: vllm
    min_shm_mib: 512
"""

RETURN = r"""
no_go: {description: Problems that stop the deployment; each names the figures and the fix., returned: always, type: list, elements: str}
cautions: {description: What works but costs speed or needs a look (also shown as warnings)., returned: always, type: list, elements: str}
facts:
  description: >-
    What was read: shm (total_mib, free_mib, ours_mib, room_mib, others_largest), model (needed_bytes,
    free_bytes, where), port_holders (pid, command, unit), python, nr_open, iommu (mode, groups,
    cmdline_flags), numa_nodes, gpus (count, names, driver_version, cuda_version, p2p).
  returned: always
  type: dict
"""

from dataclasses import asdict
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils import preflight


def version_pair(text: str) -> tuple[int, int]:
    major, minor = (int(part) for part in text.split(".")[:2])
    return major, minor


def interpreter_version(module: AnsibleModule, name: str) -> tuple[int, int] | None:
    path = module.get_bin_path(name)
    if not path:
        return None
    rc, out, err = module.run_command([path, "--version"])
    return preflight.python_version(out + err) if rc == 0 else None


def read_and_judge(module: AnsibleModule) -> preflight.Verdict:
    params, checks = module.params, set(module.params["checks"])
    proc, sysfs = Path(params["proc_root"]), Path(params["sysfs_root"])
    verdict = preflight.Verdict()
    shm = preflight.shm_room(Path(params["shm_path"]), params["service_user"])
    verdict.facts["shm"] = {**asdict(shm), "room_mib": shm.room_mib}
    req = preflight.Requirements(
        port=params["port"], service_unit=params["service_unit"], service_user=params["service_user"],
        min_shm_mib=params["min_shm_mib"] if "shm" in checks else 0,
        tp=params["tensor_parallel_size"], pp=params["pipeline_parallel_size"])
    holders: list[preflight.PortHolder] = []
    if "port" in checks:
        holders = preflight.port_holders(params["port"], proc)
        verdict.facts["port_holders"] = [asdict(holder) for holder in holders]
    if "python" in checks:
        req.python = interpreter_version(module, params["python"])
        req.python_range = (version_pair(params["python_min"]), version_pair(params["python_max"]))
        verdict.facts["python"] = ".".join(map(str, req.python)) if req.python else None
    if "limits" in checks:
        req.limit_nofile = params["limit_nofile"]
        req.nr_open = int(preflight.read_text(proc / "sys/fs/nr_open").strip() or 1048576)
        verdict.facts["nr_open"] = req.nr_open
    if "disk" in checks and params["model_current"] and params["model_sizes"]:
        sizes = {name: int(size) for name, size in params["model_sizes"].items()}
        req.model_needed, req.model_free, req.model_where = preflight.model_space(
            Path(params["model_current"]), sizes, params["model_margin_mib"])
        verdict.facts["model"] = {"needed_bytes": req.model_needed, "free_bytes": req.model_free,
                                  "where": req.model_where}
    verdict.no_go += preflight.host_problems(req, shm, holders)
    if not checks & {"platform", "gpu"}:
        return verdict  # the restart's shm check: no platform reading on that path
    iommu = preflight.iommu_state(preflight.read_text(proc / "cmdline"),
                                  len(list((sysfs / "kernel/iommu_groups").glob("*"))))
    if "platform" in checks:
        verdict.facts["iommu"] = asdict(iommu)
        verdict.facts["numa_nodes"] = preflight.numa_nodes(sysfs)
    if "gpu" in checks and params["gpu"] is not None:
        gpu = params["gpu"]
        verdict.no_go += preflight.gpu_problems(gpu, req.tp, req.pp, params["wheel_cuda"],
                                                params["planned_driver_branch"])
        topology = gpu.get("topology") or {}
        verdict.cautions += preflight.p2p_warnings(gpu.get("p2p") or {}, req.tp)
        verdict.cautions += preflight.iommu_warnings(iommu, gpu.get("architectures", []),
                                                     bool(topology.get("nvlink")), gpu.get("count", 0))
        verdict.facts["gpus"] = {key: gpu.get(key) for key in ("count", "names", "driver_version", "cuda_version", "p2p")}
    return verdict


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "checks": {"type": "list", "elements": "str", "default": ["shm", "disk", "port", "python", "limits",
                                                                      "platform", "gpu"],
                       "choices": ["shm", "disk", "port", "python", "limits", "platform", "gpu"]},
            "shm_path": {"type": "path", "default": "/dev/shm"},
            "service_user": {"type": "str", "default": "vllm"},
            "min_shm_mib": {"type": "int", "default": 512},
            "port": {"type": "int", "default": 8000},
            "service_unit": {"type": "str", "default": "vllm.service"},
            "python": {"type": "str", "default": "python3"},
            "python_min": {"type": "str", "default": "3.10"},
            "python_max": {"type": "str", "default": "3.13"},
            "limit_nofile": {"type": "int", "default": 65536},
            "model_current": {"type": "path"},
            "model_sizes": {"type": "dict", "default": {}},
            "model_margin_mib": {"type": "int", "default": 1024},
            "tensor_parallel_size": {"type": "int", "default": 1},
            "pipeline_parallel_size": {"type": "int", "default": 1},
            "gpu": {"type": "dict"},
            "wheel_cuda": {"type": "str", "default": ""},
            "planned_driver_branch": {"type": "int"},
            "proc_root": {"type": "path", "default": "/proc"},
            "sysfs_root": {"type": "path", "default": "/sys"},
        },
        supports_check_mode=True,
    )
    verdict = read_and_judge(module)
    for caution in verdict.cautions:
        module.warn(caution)
    module.exit_json(changed=False, **verdict.as_dict())


if __name__ == "__main__":
    main()
