"""playbooks/verify.yml on its own against the deployed test host: figures recorded and appended,
a wrong coherence expectation and an unreachable threshold fail the play with a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import HOST, RESULTS_DIR, PlayRun, run_playbook

pytestmark = pytest.mark.slow

BENCH_TASK = "Benchmark the service and check its output from the controller"
HISTORY = RESULTS_DIR / "vllm-fleet-local.jsonl"


def history_lines() -> list[str]:
    return HISTORY.read_text().splitlines() if HISTORY.exists() else []


def test_verify_alone_records_the_figures_and_appends_history(deployed: PlayRun, tmp_path: Path):
    before = history_lines()
    assert before, f"site.yml's verify wrote no history to {HISTORY}"
    run = run_playbook(tmp_path, "playbooks/verify.yml")
    assert run.rc == 0, run.output[-6000:]
    assert run.changed == 0
    after = history_lines()
    assert after[: len(before)] == before and len(after) == len(before) + 1
    record = json.loads(after[-1])
    assert record["host"] == "vllm-fleet-local" and record["model"] == "demo"
    assert record["result"]["server_version"] == "0.32.0"
    assert record["python_env"].startswith("/opt/vllm-fleet/envs/vllm-cpu-")
    level = record["result"]["levels"][0]
    assert level["failed"] == 0 and level["output_throughput"] > 0 and level["ttft_ms"]["p99"] >= level["ttft_ms"]["median"]
    assert record["result"]["roofline"]["bytes_per_token"] > 0
    assert record["result"]["roofline"]["ceiling_tok_s"] is None  # a CPU host: no bandwidth given
    result = run.task_result(BENCH_TASK)
    assert result["previous"] == json.loads(before[-1])["timestamp"]
    print(f"\n[verify alone on {HOST}] {run.seconds:.0f} s: {result['summary']}")


def test_wrong_coherence_expectation_fails_the_play_naming_it(deployed: PlayRun, tmp_path: Path):
    before = history_lines()
    wrong = [{"prompt": "The capital of France is", "max_tokens": 8, "expect_substring": "Paris"}]
    run = run_playbook(tmp_path, "playbooks/verify.yml", verify_coherence=wrong)
    assert run.rc != 0
    message = run.task_result(BENCH_TASK)["msg"]
    assert message.startswith("incoherent output: prompt 'The capital of France is': expected 'Paris' in the output")
    assert history_lines() == before  # an incoherent server has no figures worth keeping


def test_threshold_above_what_the_host_achieves_fails_with_the_figures(deployed: PlayRun, tmp_path: Path):
    before = history_lines()
    run = run_playbook(tmp_path, "playbooks/verify.yml", verify_min_decode_tok_s=1_000_000)
    assert run.rc != 0
    result = run.task_result(BENCH_TASK)
    measured = result["decode"]["tok_s_tpot"]
    assert result["msg"].startswith(f"below the thresholds: decode_tok_s = {measured:g} below min_decode_tok_s = 1e+06")
    assert "levels [(4, " in result["msg"]
    after = history_lines()
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert json.loads(after[-1])["threshold_failures"] == [f"decode_tok_s = {measured:g} below min_decode_tok_s = 1e+06"]
