#!/usr/bin/python
"""Ansible module: name the root cause of a vLLM unit's failed start from its journal."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_triage
short_description: Name the root cause of a vLLM unit's failed start from its journal
description:
  - Reads the unit's journal (C(journalctl -o json)) since its last start, or since I(since),
    or a log file on the host, drops known-benign noise, sees through generic wrappers, folds
    identical tensor-parallel worker tracebacks and maps the cause to a class and a remediation.
  - Never changes anything.
options:
  unit:
    description: systemd unit name; its journal is read unless I(log_path) is given.
    type: str
  log_path:
    description: A saved log on the host (journalctl text or JSON, or a plain vLLM log).
    type: path
  since:
    description: Epoch seconds to read the journal from. Default, the unit's last start while it
      is active and systemd has not restarted it; otherwise (crash loop, back-off, failed), the
      last I(lookback_seconds), so the attempts that failed are in view, not only the one
      starting now.
    type: int
  lookback_seconds:
    description: How far back to read for a unit that is not active.
    type: int
    default: 1800
  triage_rules:
    description: The triage rules (files/triage/rules.json, as data).
    type: dict
    required: true
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Why did vllm not start?
  vllm_triage:
    unit: vllm
    triage_rules: "{{ lookup('ansible.builtin.file', 'files/triage/rules.json') | from_json }}"
"""

RETURN = r"""
found:
  description: Whether a failure was found.
  returned: always
  type: bool
root_cause:
  description: One line.
  returned: always
  type: str
class:
  description: gpu_memory_held_or_oom, nccl, port_in_use, bind_address, disk_or_shm_space, host_oom,
    permissions_or_readonly, model_download_hub, cuda_kernel_fault, compile_cache,
    unsupported_model_or_gguf, attention_backend, driver_cuda_mismatch, worker_killed,
    config_or_tokenizer or other.
  returned: always
  type: str
evidence:
  description: The key log lines.
  returned: always
  type: list
remediation:
  description: What to do about it.
  returned: always
  type: str
benign_suppressed:
  description: Lines dropped as known-benign noise.
  returned: always
  type: int
workers_collapsed:
  description: Identical worker tracebacks folded into the first.
  returned: always
  type: int
benign_dropped:
  description: Benign lines dropped, per benign rule id.
  returned: always
  type: dict
likely_class:
  description: >-
    Where no rule named the cause (no failure line, or only the catch-all class C(other)): the class
    whose logs in the public corpus share most of this log's words (the rules' word model). A hint
    for the operator; C(class) stays the rules' answer. Null otherwise.
  returned: always
  type: str
likely_remediation:
  description: The remediation of RV(likely_class), empty when there is none.
  returned: always
  type: str
"""

import io
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.systemd_unit import read_journal, read_unit_state
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_triage import (
    UnusableInput,
    rules_from_data,
    triage,
    triage_path,
    triage_stream,
)


def journal_start(unit: str, since: int | None, lookback_seconds: int) -> int | None:
    if since:
        return since
    state = read_unit_state(unit)
    # Restarted by systemd since its start: in a crash loop the launcher may be waiting out its
    # back-off right now (active, nothing logged yet), so the failed attempts are the ones to read.
    if state.active_state != "active" or state.n_restarts > 0:
        return int(time.time()) - lookback_seconds
    return state.started_at - 1 if state.started_at else None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str"},
            "log_path": {"type": "path"},
            "since": {"type": "int"},
            "lookback_seconds": {"type": "int", "default": 1800},
            "triage_rules": {"type": "dict", "required": True},
        },
        required_one_of=[("unit", "log_path")],
        supports_check_mode=True,
    )
    p = module.params
    rules = rules_from_data(p["triage_rules"])
    try:
        if p["log_path"]:
            report = triage_path(p["log_path"], rules)
        else:
            text = read_journal(p["unit"], since=journal_start(p["unit"], p["since"], p["lookback_seconds"]))
            # An empty journal is "nothing logged", not unusable input.
            report = (triage_stream(io.BytesIO(text.encode("utf-8", errors="replace")), rules)
                      if text.strip() else triage([], rules))
    except UnusableInput as error:
        module.fail_json(msg=f"cannot triage: {error}")
    module.exit_json(changed=False, **report.as_dict())


if __name__ == "__main__":
    main()
