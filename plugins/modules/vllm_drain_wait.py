#!/usr/bin/python
"""Ansible module: wait until a vLLM server has no requests running or waiting (from /metrics)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_drain_wait
short_description: Wait until a vLLM server has finished its in-flight requests
description:
  - Polls the server's Prometheus C(/metrics) until C(vllm:num_requests_running) and
    C(vllm:num_requests_waiting) are 0, the server is not listening (nothing can be in flight),
    the token counters stop moving (stale gauges), or C(timeout) passes. An HTTP error fails.
  - Used after the host left its load balancer and before the graceful stop, so no request is cut.
  - Changes nothing; reports the wait.
options:
  base_url:
    description: The server's root URL (http://host:port), without /v1.
    type: str
    required: true
  model:
    description: Served model name whose gauges count; all models when omitted.
    type: str
  timeout:
    description: Longest wait in seconds.
    type: float
    default: 120
  interval:
    description: Seconds between polls.
    type: float
    default: 0.5
  stall_seconds:
    description: Requests the gauges still count are taken as finished when no prompt or output token
      was processed for this long (vLLM refreshes the gauges only when its engine runs a step).
    type: float
    default: 10
  fail_on_timeout:
    description: Fail when requests are still in flight after C(timeout); otherwise warn and go on
      (the stop's --shutdown-timeout still drains them).
    type: bool
    default: false
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Wait for in-flight requests to finish
  vllm_drain_wait:
    base_url: http://10.0.0.5:8000
    model: glm-5
    timeout: 300
"""

RETURN = r"""
drained:
  description: Whether nothing was in flight when the wait ended.
  returned: always
  type: bool
waited_s:
  description: Seconds waited.
  returned: always
  type: float
running:
  description: Requests running at the last poll (null when the server did not answer).
  returned: always
  type: float
waiting:
  description: Requests waiting at the last poll.
  returned: always
  type: float
reason:
  description: Why the wait ended.
  returned: always
  type: str
"""

import urllib.error

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_metrics import wait_until_idle


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "base_url": {"type": "str", "required": True},
            "model": {"type": "str"},
            "timeout": {"type": "float", "default": 120.0},
            "interval": {"type": "float", "default": 0.5},
            "fail_on_timeout": {"type": "bool", "default": False},
            "stall_seconds": {"type": "float", "default": 10.0},
        },
        supports_check_mode=True,
    )
    params = module.params
    endpoint = Endpoint(params["base_url"])
    url = endpoint.url("/metrics")
    # Check mode: one look (the balancer's drain did not happen, so traffic still flows).
    timeout = 0.0 if module.check_mode else params["timeout"]
    try:
        outcome = wait_until_idle(endpoint, params["model"], timeout, params["interval"], params["stall_seconds"])
    except urllib.error.HTTPError as error:
        module.fail_json(msg=f"{url} answered HTTP {error.code}: cannot tell what is in flight")
    result = {"changed": False, "drained": outcome.drained, "waited_s": round(outcome.waited_s, 2),
              "running": outcome.last.running if outcome.last else None,
              "waiting": outcome.last.waiting if outcome.last else None, "reason": outcome.reason}
    if not outcome.drained:
        if params["fail_on_timeout"]:
            module.fail_json(msg=f"requests still in flight: {outcome.reason}", **result)
        module.warn(f"requests still in flight, stopping anyway (the drain timeout applies): {outcome.reason}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
