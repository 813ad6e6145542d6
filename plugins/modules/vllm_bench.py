#!/usr/bin/python
"""Ansible module: benchmark a vLLM server, check coherence, apply thresholds, keep history."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_bench
short_description: Measure a vLLM server like `vllm bench serve` and check its output is right
description:
  - Waits for /health, checks /v1/models lists the model, sends a warm-up request, then checks each
    coherence case greedily (temperature 0) against its expected substring, text or token ids.
  - Measures single-stream decode (TPOT-based and wall-based tok/s) and, per concurrency level,
    output token throughput, TTFT, TPOT and ITL (mean/median/p99) and failed requests, streaming
    through aiohttp as `vllm bench serve` does (the checks go through the OpenAI client). Tokens
    come from the server's usage block.
  - Compares with thresholds (the play fails with the figures) and with the previous run in a JSON
    lines history file, which gets one more line per run.
  - Changes nothing on the server; reports changed=false.
requirements:
  - openai and aiohttp where the module runs (the controller venv has both)
options:
  base_url: {description: OpenAI API base URL ending in /v1., type: str, required: true}
  model: {description: Served model name., type: str, required: true}
  api_key: {description: Bearer token; empty when none., type: str, default: ""}
  health_timeout: {description: Seconds to wait for /health., type: float, default: 300}
  request_timeout: {description: Seconds one request may take., type: float, default: 300}
  plan:
    description: What to measure (keys of BenchPlan in plugins/module_utils/vllm_bench.py).
    type: dict
    default: {}
  coherence:
    description: Cases with prompt, max_tokens and one or more of expect_substring, expect_text, expect_token_ids.
    type: list
    elements: dict
    default: []
  thresholds:
    description: min_decode_tok_s, min_output_throughput, max_ttft_p99_ms, min_roofline_fraction (null = off).
    type: dict
    default: {}
  roofline:
    description: The vllm_roofline module's result; its ceiling gives the measured fraction.
    type: dict
  history_file:
    description: JSON lines file on the controller; one record is appended per run. Empty = none.
    type: path
  regression_pct:
    description: A figure worse than the previous run by more than this percentage is reported.
    type: float
    default: 10
  fail_on_regression: {description: Fail the task on a reported regression., type: bool, default: false}
  record:
    description: Extra facts stored with the run (host, versions, patch series, tuning).
    type: dict
    default: {}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Benchmark and check the service
  vllm_bench:
    base_url: http://10.0.0.5:8000/v1
    model: glm-5
    api_key: "{{ vault_vllm_api_key }}"
    plan: {concurrency: [1, 8, 32], decode_max_tokens: 512}
    coherence:
      - {prompt: "The capital of France is", max_tokens: 8, expect_substring: Paris}
    thresholds: {min_decode_tok_s: 50}
    history_file: /srv/fleet/results/gpu01.jsonl
  delegate_to: localhost
"""

RETURN = r"""
decode:
  description: Single-stream decode, tok_s_tpot (1 / mean TPOT), tok_s_wall, ttft_ms, output_tokens.
  returned: success
  type: dict
levels:
  description: Per concurrency level, output_throughput, request_throughput, ttft_ms/tpot_ms/itl_ms (mean, median, p99), failed.
  returned: success
  type: list
coherence:
  description: Per case, prompt, text and ok.
  returned: success
  type: list
roofline_fraction:
  description: Single-stream decode tok/s over the bandwidth-bound ceiling; null without a ceiling.
  returned: success
  type: float
regressions:
  description: Figures worse than the previous run beyond regression_pct.
  returned: always
  type: list
summary:
  description: The figures as lines for the play output.
  returned: success
  type: list
server_version:
  description: vLLM version the server reports at /version.
  returned: success
  type: str
previous:
  description: Timestamp of the run compared with, or null.
  returned: success
  type: str
"""

import time
from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.bench_history import append_record, previous_record, regressions, threshold_failures
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_bench import (BenchError, BenchPlan, Endpoint, benchmark_service, coherence_cases,
                                                                                  server_version, summary_lines)
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_probe import ProbeError, connect


def measure(params: dict) -> dict:
    client, _served_ids, _waited = connect(params["base_url"], params["model"], params["api_key"],
                                           params["health_timeout"], params["request_timeout"])
    endpoint = Endpoint(params["base_url"], params["api_key"], params["request_timeout"])
    result = benchmark_service(client, endpoint, params["model"], BenchPlan(**params["plan"]),
                               coherence_cases(params["coherence"]))
    ceiling = (params["roofline"] or {}).get("ceiling_tok_s")
    result["roofline"] = params["roofline"]
    result["roofline_fraction"] = round(result["decode"]["tok_s_tpot"] / ceiling, 4) if ceiling else None
    result["server_version"] = server_version(params["base_url"], params["api_key"])
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "base_url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "health_timeout": {"type": "float", "default": 300.0},
            "request_timeout": {"type": "float", "default": 300.0},
            "plan": {"type": "dict", "default": {}},
            "coherence": {"type": "list", "elements": "dict", "default": []},
            "thresholds": {"type": "dict", "default": {}},
            "roofline": {"type": "dict"},
            "history_file": {"type": "path"},
            "regression_pct": {"type": "float", "default": 10.0},
            "fail_on_regression": {"type": "bool", "default": False},
            "record": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = measure(params)
    except (BenchError, ProbeError) as error:
        module.fail_json(msg=str(error))
    except (TypeError, KeyError) as error:  # a plan or coherence key that does not exist
        module.fail_json(msg=f"bad plan or coherence entry: {error}")
    except Exception as error:  # the client's own errors: connection, HTTP status, timeouts
        module.fail_json(msg=f"{type(error).__name__} talking to {params['base_url']}: {error}")

    history = Path(params["history_file"]) if params["history_file"] else None
    previous = previous_record(history, params["model"]) if history else None
    found = regressions(result, previous["result"], params["regression_pct"]) if previous else []
    failures = threshold_failures(result, params["thresholds"])
    record = dict(params["record"], model=params["model"], base_url=params["base_url"],
                  timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  thresholds=params["thresholds"], threshold_failures=failures, regressions=found, result=result)
    if history and not module.check_mode:
        append_record(history, record)
    outcome = dict(changed=False, summary=summary_lines(result), regressions=found, previous=previous["timestamp"] if previous else None,
                   threshold_failures=failures, history_file=str(history) if history else None, **result)
    if failures:
        module.fail_json(msg="below the thresholds: " + "; ".join(failures) + f" (decode {result['decode']}, "
                         f"levels {[(lvl['concurrency'], lvl['output_throughput']) for lvl in result['levels']]})",
                         **outcome)
    if found and params["fail_on_regression"]:
        module.fail_json(msg="regression against the previous run: " + "; ".join(found), **outcome)
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()
