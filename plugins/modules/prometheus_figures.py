#!/usr/bin/python
"""Ansible module: a vLLM host's current figures from Prometheus."""

from __future__ import annotations

DOCUMENTATION = r"""
module: prometheus_figures
short_description: A vLLM host's current figures from the monitoring role's Prometheus
description:
  - Asks Prometheus (its HTTP API) for one host's output tok/s, one stream's decode tok/s, TTFT p99,
    KV-cache use, requests running and waiting and the vLLM unit's restarts in the last hour (the
    monitoring role's recording rules and metrics), and the alerts firing for it.
  - A figure Prometheus has no value for (an idle host's latency) is null. Reads only.
options:
  url: {description: Prometheus's base URL as seen from where the module runs., type: str, default: "http://127.0.0.1:9090"}
  host: {description: "The host label (the inventory name the monitoring role gives every target).", type: str, required: true}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Current figures of this host
  vllm_fleet.fleet.prometheus_figures:
    host: "{{ inventory_hostname }}"
  delegate_to: "{{ groups['monitoring'][0] }}"
  register: live
"""

RETURN = r"""
figures:
  description: >-
    output_tok_s, decode_tok_s, ttft_p99_s, kv_cache_usage (0 to 1), requests_running,
    requests_waiting, unit_restarts_1h (each a number or null) and alerts (names of the firing alerts).
  returned: success
  type: dict
summary: {description: The figures on one line., returned: success, type: str}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.prometheus import PrometheusError, host_figures, summary_line


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "default": "http://127.0.0.1:9090"},
            "host": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    try:
        figures = host_figures(module.params["url"], module.params["host"])
    except PrometheusError as error:
        module.fail_json(msg=f"Prometheus: {error}")
    module.exit_json(changed=False, figures=figures, summary=summary_line(figures))


if __name__ == "__main__":
    main()
