#!/usr/bin/python
"""Ansible module: stop what still holds the accelerators, the port and /dev/shm before a start."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_cleanup
short_description: Stop leftover GPU and vLLM processes and remove stale shared memory before a start
description:
  - Its scope is the processes of I(unit)'s cgroup and of I(service_user) (those that left the
    unit, or an earlier manual run). It stops them, and fails naming anything else that holds the
    unit's GPUs (device nodes matching I(device_glob) of I(visible_devices), nvidia-smi compute
    apps) or listens on I(port), before anything is stopped, unless I(force).
  - A vLLM process title (VLLM::EngineCore, Worker_TP*) outside the scope is another server, not a
    leftover, and is left alone; so are the system's GPU daemons (I(system_daemons)) holding device
    files, even with I(force).
  - Stops SIGTERM, waits I(term_timeout), then SIGKILL; removes files in /dev/shm matching
    I(shm_patterns) that no live process has open or mapped; where nvidia-smi exists, waits until
    the unit's GPUs' memory is free.
  - In check mode it only reports (and still fails on holders outside the scope), so a restart can
    run it before stopping the unit.
options:
  service_user:
    description: The service's user; its processes are in scope.
    type: str
    required: true
  unit:
    description: The systemd unit (without .service); the processes of its cgroup are in scope.
    type: str
  visible_devices:
    description:
      - The unit's CUDA_VISIBLE_DEVICES. Only these GPUs' device nodes and memory count; empty, or
        GPU UUIDs, mean every GPU.
    type: str
    default: ""
  system_daemons:
    description: Program names of system GPU daemons that are never holders.
    type: list
    elements: str
    default: [nvidia-persistenced, nv-fabricmanager, nv-hostengine, dcgm-exporter, nvidia-dcgm]
  port:
    description: The serving port; its listener is a holder.
    type: int
  device_glob:
    description: Device files whose holders keep the GPUs busy (tests point it at a fixture path).
    type: str
    default: /dev/nvidia*
  title_patterns:
    description: Regular expressions for vLLM process titles (matched on cmdline and comm).
    type: list
    elements: str
    default: ['^VLLM::', '^Worker_TP\d+', '^VllmWorker', '^EngineCore']
  shm_dir:
    description: Shared memory directory.
    type: path
    default: /dev/shm
  shm_patterns:
    description: Names of shared-memory files vLLM, NCCL and multiprocessing leave behind.
    type: list
    elements: str
    default: ['nccl-*', 'psm_*', 'vllm*']
  force:
    description: Also stop holders outside the scope (never the system daemons).
    type: bool
    default: false
  term_timeout:
    description: Seconds to wait after SIGTERM before SIGKILL.
    type: float
    default: 15
  kill_timeout:
    description: Seconds to wait after SIGKILL before giving up.
    type: float
    default: 5
  gpu_memory_timeout:
    description: Seconds to wait for GPU memory to be released (where nvidia-smi exists).
    type: float
    default: 60
  gpu_memory_free_mib:
    description: A GPU counts as free below this many MiB used.
    type: int
    default: 1024
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Clean leftovers of earlier runs
  vllm_cleanup:
    service_user: vllm
    port: 8000
"""

RETURN = r"""
holders:
  description: Each holder found, with pid, user, cmdline, reasons, in_scope and cgroup.
  returned: always
  type: list
stale_shm_files:
  description: Shared-memory files no process uses.
  returned: always
  type: list
terminated:
  description: PIDs that exited after SIGTERM.
  returned: always
  type: list
killed:
  description: PIDs that needed SIGKILL.
  returned: always
  type: list
removed_shm_files:
  description: Files removed from shm_dir.
  returned: always
  type: list
uninspectable_pids:
  description: Processes whose open files could not be read (a warning names them).
  returned: always
  type: list
gpu_memory_wait_seconds:
  description: Seconds waited for GPU memory to be released; null without nvidia-smi.
  returned: always
  type: float
"""

import os
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gpu_leftovers import (
    DEFAULT_SYSTEM_DAEMONS,
    CleanupResult,
    Scope,
    parse_visible_devices,
    find_holders,
    out_of_scope_message,
    parse_compute_apps,
    parse_gpu_memory_used,
    run_nvidia_smi,
    stale_shm_files,
    stop_processes,
    wait_for_gpu_memory,
)


def unit_cgroup(module: AnsibleModule, unit: str | None) -> str:
    """The unit's cgroup as systemd reports it; a stopped unit has none, so its default place."""
    if not unit:
        return ""
    name = unit if "." in unit else f"{unit}.service"
    rc, out, _err = module.run_command(["systemctl", "show", "--property=ControlGroup", "--value", name])
    return out.strip() if rc == 0 and out.strip() else f"/system.slice/{name}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "service_user": {"type": "str", "required": True},
            "unit": {"type": "str"},
            "visible_devices": {"type": "str", "default": ""},
            "system_daemons": {"type": "list", "elements": "str", "default": list(DEFAULT_SYSTEM_DAEMONS)},
            "port": {"type": "int"},
            "device_glob": {"type": "str", "default": "/dev/nvidia*"},
            "title_patterns": {"type": "list", "elements": "str",
                               "default": ["^VLLM::", r"^Worker_TP\d+", "^VllmWorker", "^EngineCore"]},
            "shm_dir": {"type": "path", "default": "/dev/shm"},
            "shm_patterns": {"type": "list", "elements": "str", "default": ["nccl-*", "psm_*", "vllm*"]},
            "force": {"type": "bool", "default": False},
            "term_timeout": {"type": "float", "default": 15.0},
            "kill_timeout": {"type": "float", "default": 5.0},
            "gpu_memory_timeout": {"type": "float", "default": 60.0},
            "gpu_memory_free_mib": {"type": "int", "default": 1024},
        },
        supports_check_mode=True,
    )
    p = module.params
    nvidia_smi = module.get_bin_path("nvidia-smi")
    gpu_apps = parse_compute_apps(run_nvidia_smi(nvidia_smi, "--query-compute-apps=pid,used_memory")) if nvidia_smi else {}
    scope = Scope(p["service_user"], tuple(p["title_patterns"]), unit_cgroup=unit_cgroup(module, p["unit"]),
                  gpus=parse_visible_devices(p["visible_devices"]), system_daemons=tuple(p["system_daemons"]))
    result = CleanupResult()
    result.holders = find_holders(scope, p["device_glob"], p["port"], gpu_apps, uninspectable=result.uninspectable_pids)
    if result.uninspectable_pids:
        module.warn(f"could not read the open files of {len(result.uninspectable_pids)} process(es) "
                    f"(no CAP_SYS_PTRACE?): {result.uninspectable_pids[:20]}; they may hold a GPU unseen")
    outside = [h for h in result.holders if not h.in_scope]
    if outside and not p["force"]:
        module.fail_json(msg=out_of_scope_message(outside), **result.as_dict())
    if module.check_mode:
        result.stale_shm_files = stale_shm_files(Path(p["shm_dir"]), p["shm_patterns"])
        module.exit_json(**{**result.as_dict(), "changed": bool(result.holders or result.stale_shm_files)})
    stop_processes([h.pid for h in result.holders], p["term_timeout"], p["kill_timeout"], result)
    if result.survivors:
        module.fail_json(msg=f"processes survived SIGKILL (uninterruptible, D state?): {result.survivors}",
                         **result.as_dict())
    result.stale_shm_files = stale_shm_files(Path(p["shm_dir"]), p["shm_patterns"])
    for path in result.stale_shm_files:
        os.unlink(path)
        result.removed_shm_files.append(path)
    if nvidia_smi:
        def read_used() -> dict[int, int]:
            return parse_gpu_memory_used(run_nvidia_smi(nvidia_smi, "--query-gpu=index,memory.used"))

        waited, used = wait_for_gpu_memory(read_used, p["gpu_memory_free_mib"], p["gpu_memory_timeout"], gpus=scope.gpus)
        result.gpu_memory_wait_seconds = round(waited, 2)
        busy = {gpu: mib for gpu, mib in used.items() if mib >= p["gpu_memory_free_mib"]}
        if busy:
            module.fail_json(msg=f"GPU memory still in use after {waited:.0f} s (MiB by GPU): {busy}", **result.as_dict())
    module.exit_json(**result.as_dict())


if __name__ == "__main__":
    main()
