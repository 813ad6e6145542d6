"""The word model: the likely class of a log no cause rule names (module_utils/triage_words.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.triage_words import (
    model_from_data,
    model_to_data,
    train,
    words_of,
)
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_triage import (
    load_rules,
    parse_log,
    rules_from_data,
    triage,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES_PATH = REPO_ROOT / "files" / "triage" / "rules.json"
CLI = REPO_ROOT / "tools" / "triage.py"

# An exception no cause rule names, in a log whose other lines speak of Ray's memory monitor.
UNNAMED_HOST_MEMORY_FAILURE = """\
(raylet) WARNING memory_monitor: node memory usage above threshold, worker killing policy engaged
(raylet) A worker died or was killed while executing a task by an unexpected system error.
RuntimeError: the actor ended unexpectedly before finishing this task
"""


@pytest.fixture(scope="module")
def rules():
    return load_rules(RULES_PATH)


@pytest.fixture(scope="module")
def rules_data():
    return json.loads(RULES_PATH.read_text(encoding="utf-8"))


def test_words_are_lower_case_words_of_three_letters_or_more():
    assert words_of(["CUDA out of memory at 0x7f3a", "ncclSystemError: rank 3"]) == {
        "cuda", "out", "memory", "ncclsystemerror", "rank"}


def test_the_likeliest_class_is_the_one_whose_logs_share_the_words():
    model = train([
        ({"nccl", "allreduce", "timeout"}, "nccl"),
        ({"nccl", "socket", "timeout"}, "nccl"),
        ({"cuda", "memory", "allocate"}, "gpu_memory_held_or_oom"),
        ({"cuda", "memory", "tried"}, "gpu_memory_held_or_oom"),
    ])
    assert model.likeliest({"nccl", "timeout", "unknown"}) == "nccl"
    assert model.likeliest({"memory", "cuda"}) == "gpu_memory_held_or_oom"


def test_a_word_of_one_training_log_only_is_not_learnt():
    model = train([({"common", "rare"}, "nccl"), ({"common"}, "other")])
    assert model.vocabulary == {"common"}


def test_the_model_survives_its_rules_json_form():
    model = train([({"nccl", "timeout"}, "nccl"), ({"nccl", "memory"}, "nccl"), ({"memory"}, "host_oom")])
    assert model_from_data(json.loads(json.dumps(model_to_data(model)))) == model


def test_rules_refuse_a_word_model_with_a_class_no_rule_has(rules_data):
    data = dict(rules_data, word_model={"no_such_class": {"logs": 1, "words": "nccl:1"}})
    with pytest.raises(ValueError, match="no_such_class"):
        rules_from_data(data)


def test_an_exception_no_rule_names_gets_a_likely_class_beside_the_rules_answer(rules, rules_data):
    report = triage(parse_log(UNNAMED_HOST_MEMORY_FAILURE), rules)
    assert report.found and report.cause_class == "other"
    assert report.likely_class == "host_oom"
    assert report.likely_remediation == next(cause["remediation"] for cause in rules_data["causes"]
                                             if cause["class"] == "host_oom" and cause.get("remediation"))
    without_model = rules_from_data({key: value for key, value in rules_data.items() if key != "word_model"})
    assert triage(parse_log(UNNAMED_HOST_MEMORY_FAILURE), without_model).likely_class is None


@pytest.mark.parametrize(("words", "likely"), [("wone wtwo wthree wfour", None),
                                               ("wone wtwo wthree wfour wfive wsix", "host_oom")])
def test_the_catch_all_class_keeps_its_answer_unless_the_words_are_far_likelier(rules_data, words, likely):
    """Each shared word makes host_oom 5 times likelier than "other" here (log 5 = 1.6): four words
    (6.4) stay under the margin (e**8), six (9.7) pass it. Without the margin both would be host_oom."""
    model = train([({"wone", "wtwo", "wthree", "wfour", "wfive", "wsix"}, "host_oom")] * 2 + [({"ozero"}, "other")] * 2)
    rules = rules_from_data(dict(rules_data, word_model=model_to_data(model)))
    report = triage(parse_log(f"RuntimeError: {words}\n"), rules)
    assert report.cause_class == "other" and report.likely_class == likely


def test_a_cause_a_rule_names_gets_no_likely_class_whatever_the_words_say(rules):
    log = UNNAMED_HOST_MEMORY_FAILURE.replace("RuntimeError: the actor ended unexpectedly before finishing this task",
                                              "OSError: [Errno 98] Address already in use")
    assert rules.word_model.likeliest(words_of(log.splitlines())) == "host_oom"
    report = triage(parse_log(log), rules)
    assert report.cause_class == "port_in_use" and report.likely_class is None


def test_a_log_that_shows_a_requested_stop_gets_no_likely_class(rules):
    log = (REPO_ROOT / "tests" / "fixtures" / "triage" / "clean_start_then_sigterm.log").read_text()
    report = triage(parse_log(log), rules)
    assert not report.found and report.likely_class is None


def test_a_log_of_wrappers_only_gets_no_likely_class_whatever_the_words_say(rules):
    """The cause was printed where the log does not reach: its words (here Ray's memory monitor's)
    are no evidence of it."""
    log = UNNAMED_HOST_MEMORY_FAILURE.replace(
        "RuntimeError: the actor ended unexpectedly before finishing this task",
        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. This should never happen!")
    assert rules.word_model.likeliest(words_of(log.splitlines())) == "host_oom"
    report = triage(parse_log(log), rules)
    assert report.root_cause.startswith("only a generic wrapper was logged")
    assert report.cause_class == "other" and report.likely_class is None


def test_a_log_with_no_failure_line_and_no_stop_gets_a_likely_class(rules):
    log = "INFO 12-01 10:00:00 ray_utils.py:100] node memory usage 97%, raylet is killing workers\n" * 3
    report = triage(parse_log(log), rules)
    assert not report.found and report.cause_class is None
    assert report.likely_class == "host_oom"


def test_the_cli_prints_the_likely_class_and_keeps_the_rules_class(tmp_path):
    log = tmp_path / "unnamed.log"
    log.write_text(UNNAMED_HOST_MEMORY_FAILURE)
    result = subprocess.run([sys.executable, str(CLI), str(log)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "Class:       other" in result.stdout
    assert "Likely class: host_oom" in result.stdout


def test_the_word_model_in_rules_json_is_the_one_the_corpus_trains(rules_data):
    """A corpus change without `score.py --write-word-model` fails here."""
    from tests.fixtures.triage.score import trained_word_model

    assert rules_data["word_model"] == trained_word_model()


SCORES_OF_A_CORPUS_LOG = """
import sys
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.triage_words import words_of
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_triage import load_rules
rules = load_rules(sys.argv[1])
words = words_of(open(sys.argv[2], encoding="utf-8").read().splitlines())
print(repr(sorted(rules.word_model.log_scores(words).items())))
"""


def test_a_logs_scores_do_not_depend_on_the_hash_seed():
    """A set's order follows PYTHONHASHSEED; a sum in that order moved the last bits of a score,
    and a near tie (the catch-all margin) with them."""
    log = REPO_ROOT / "tests" / "fixtures" / "triage" / "corpus" / "logs" / "opea-genaicomps-1549-python-under-root.log"
    outputs = {
        subprocess.run([sys.executable, "-c", SCORES_OF_A_CORPUS_LOG, str(RULES_PATH), str(log)], check=True,
                       capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("0", "1", "2", "3")
    }
    assert len(outputs) == 1, outputs
