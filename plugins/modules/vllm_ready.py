#!/usr/bin/python
"""Ansible module: the readiness gate of a vLLM unit; fails fast on a crash, with the root cause."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_ready
short_description: Wait until a vLLM unit serves, fail within seconds of a crash with its root cause
description:
  - Polls /health, /v1/models and one real completion, and between polls reads the unit's state
    from systemd. A rising NRestarts, an auto-restart, a failed or stopped unit, a new MainPID, or
    a completion that fails after /health answered ends the wait at once.
  - On failure it reads the unit's journal since this start, runs the triage rules over it and
    fails with the root cause, its class and a remediation in the message.
  - Runs on the host (standard library only); changes nothing.
options:
  unit:
    description: systemd unit name.
    type: str
    required: true
  base_url:
    description: Server root, without /v1 (http://host:port).
    type: str
    required: true
  model:
    description: Served model name.
    type: str
    required: true
  api_key:
    description: Bearer token, when the server needs one.
    type: str
    default: ""
  timeout:
    description: Seconds a healthy load may take.
    type: float
    default: 900
  interval:
    description: Seconds between polls.
    type: float
    default: 1
  triage_rules:
    description: The triage rules (files/triage/rules.json, as data).
    type: dict
    required: true
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Wait for vLLM, fail fast on a crash loop
  vllm_ready:
    unit: vllm
    base_url: http://10.0.0.5:8000
    model: glm-5
    timeout: 1800
    triage_rules: "{{ lookup('ansible.builtin.file', 'files/triage/rules.json') | from_json }}"
"""

RETURN = r"""
seconds:
  description: Seconds the gate waited.
  returned: always
  type: float
reason:
  description: Why the gate ended (ready, or the crash sign).
  returned: always
  type: str
unit_state:
  description: The unit's state when the gate ended.
  returned: always
  type: dict
triage:
  description: The triage report (root_cause, class, evidence, remediation, ...), on failure.
  returned: failure
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.readiness import wait_until_ready
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.systemd_unit import read_journal, read_unit_state
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_triage import parse_log, rules_from_data, triage


def failure_message(unit: str, reason: str, seconds: float, report: dict) -> str:
    message = f"{unit} did not become ready after {seconds:.1f} s: {reason}."
    if report.get("found"):
        message += f" Root cause [{report['class']}]: {report['root_cause']}. Remediation: {report['remediation']}"
    else:
        message += " The journal shows no failure: read it with journalctl -u " + unit
    if report.get("likely_class"):
        message += (f" No rule named the cause; the log's words resemble [{report['likely_class']}]:"
                    f" {report['likely_remediation']}")
    return message


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "base_url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "timeout": {"type": "float", "default": 900.0},
            "interval": {"type": "float", "default": 1.0},
            "triage_rules": {"type": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: nothing was started to wait for")
    rules = rules_from_data(p["triage_rules"])
    endpoint = Endpoint(p["base_url"], p["api_key"])
    since = read_unit_state(p["unit"]).started_at
    result = wait_until_ready(endpoint, p["model"], lambda: read_unit_state(p["unit"]), p["timeout"], p["interval"])
    if result.ready:
        module.exit_json(changed=False, **result.as_dict())
    report = triage(parse_log(read_journal(p["unit"], since=since - 1 if since else None)), rules).as_dict()
    module.fail_json(msg=failure_message(p["unit"], result.reason, result.seconds, report),
                     triage=report, **result.as_dict())


if __name__ == "__main__":
    main()
