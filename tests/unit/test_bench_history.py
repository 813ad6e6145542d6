"""Thresholds, regressions and the append-only history."""

from __future__ import annotations

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.bench_history import (
    append_record, previous_record, read_history, regressions, threshold_failures)


def result(decode: float, throughput: float, ttft_p99: float = 50.0, fraction: float | None = None) -> dict:
    return {"decode": {"tok_s_tpot": decode}, "decode_load": {"ttft_ms": {"p99": 10.0}},
            "levels": [{"concurrency": 4, "output_throughput": throughput, "ttft_ms": {"p99": ttft_p99}}],
            "roofline_fraction": fraction}


def test_thresholds_name_the_figure_and_the_limit():
    failures = threshold_failures(result(40.0, 900.0, ttft_p99=300.0),
                                  {"min_decode_tok_s": 57.0, "min_output_throughput": 800.0,
                                   "max_ttft_p99_ms": 250.0, "min_roofline_fraction": None})
    assert failures == ["decode_tok_s = 40 below min_decode_tok_s = 57", "ttft_p99_ms = 300 above max_ttft_p99_ms = 250"]


def test_roofline_threshold_without_a_ceiling_fails_clearly():
    assert "not available" in threshold_failures(result(40.0, 1.0), {"min_roofline_fraction": 0.5})[0]


def test_unknown_threshold_is_an_error():
    with pytest.raises(KeyError, match="unknown threshold"):
        threshold_failures(result(1.0, 1.0), {"min_tok_s": 1.0})


def test_regressions_beyond_the_allowed_percentage_only():
    previous = result(100.0, 1000.0, ttft_p99=100.0)
    assert regressions(result(95.0, 990.0, ttft_p99=105.0), previous, 10.0) == []
    found = regressions(result(80.0, 1000.0, ttft_p99=130.0), previous, 10.0)
    assert found == ["decode_tok_s 100 -> 80 (-20.0 %, allowed 10 %)", "ttft_p99_ms 100 -> 130 (+30.0 %, allowed 10 %)"]


def test_history_is_appended_and_the_previous_run_is_per_model(tmp_path):
    path = tmp_path / "results" / "host.jsonl"
    assert previous_record(path, "demo") is None
    append_record(path, {"model": "demo", "timestamp": "t1", "result": result(1.0, 1.0)})
    append_record(path, {"model": "other", "timestamp": "t2", "result": result(2.0, 2.0)})
    append_record(path, {"model": "demo", "timestamp": "t3", "result": result(3.0, 3.0)})
    assert [r["timestamp"] for r in read_history(path)] == ["t1", "t2", "t3"]
    assert previous_record(path, "demo")["timestamp"] == "t3"
    assert previous_record(path, "other")["timestamp"] == "t2"
