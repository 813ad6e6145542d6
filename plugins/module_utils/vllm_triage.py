"""Name the root cause of a failed vLLM start from its service log.

A failed start buries its cause: every tensor-parallel worker prints the same traceback,
the engine and the API server then print generic wrappers ("WorkerProc initialization
failed", "Engine core initialization failed. See root cause above."), and harmless
warnings are logged at ERROR level. This module drops the known noise (rules data file),
sees through the wrappers to the first real exception, folds duplicate worker tracebacks
into one, and maps the cause to a class and a remediation.

Standard library only: it runs on an operator laptop and inside an Ansible module.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain, islice, repeat
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from .triage_words import WordModel, model_from_data, top_class, words_of

CAUSE_CLASSES = (
    "gpu_memory_held_or_oom",
    "nccl",
    "port_in_use",
    "bind_address",
    "disk_or_shm_space",
    "host_oom",
    "permissions_or_readonly",
    "model_download_hub",
    "cuda_kernel_fault",
    "compile_cache",
    "unsupported_model_or_gguf",
    "attention_backend",
    "driver_cuda_mismatch",
    "worker_killed",
    "config_or_tokenizer",
    "other",
)
FALLBACK_CLASS = "other"
ROOT_CAUSE_MAX_CHARS = 400
EVIDENCE_MAX_LINES = 12
OTHER_WORKER_EVIDENCE_LINES = 3
LINE_CONTINUATION_MAX = 3
# A message that ends in ':' ("... the WNA16 linear layer. Reasons:") lists its details below.
LISTED_DETAILS_MAX = 8
# How far after a wrapper its reason may be printed (CANN's operator error and inner stack).
WRAPPER_REASON_LINES = 20
# How far before a weak rule's symptom its library may have printed the reason.
SYMPTOM_REASON_LINES = 5
SECONDARY_LEVELS = ("WARNING", "ERROR", "CRITICAL")
QUIET_LEVELS = ("INFO", "DEBUG")
# A process that died is usually the consequence of an error printed elsewhere in the log.
WEAK_CLASSES = ("worker_killed",)
SUPPORTING_EVIDENCE_LINES = 3
# Where the rules fell back to "other", the word model's class must be this much likelier (log
# odds; e**8 ~ 3000 times): "other" gathers unrelated failures, so a log of it resembles every
# class a little (docs/triage.md: how the margin was chosen on the replay's first-sight answers).
CATCH_ALL_MARGIN = 8.0

# (APIServer pid=123) / (EngineCore_DP0 pid=123) / (VllmWorker rank=0 pid=7) /
# (RayWorkerWrapper pid=67451, ip=10.1.0.7) / (ServeReplica:default:app pid=526); Ray nests them.
VLLM_PROCESS_PREFIX = re.compile(
    r"^\((?P<process>[\w.:\-]+(?: [A-Z]{2}\d+)*)(?: rank=\d+)? pid=(?P<pid>\d+)(?:, ip=[\d.]+)?\) ?"
)
# "(raylet, ip=10.0.0.7)", "(autoscaler +34s)": Ray's daemons, the autoscaler with its uptime
RAY_DAEMON_PREFIX = re.compile(r"^\((?P<process>raylet|gcs_server|autoscaler)(?: \+(?:\d+[dhms])+)?(?:, ip=[\d.]+)?\) ?")
# torch.distributed prefixes every line of a rank's output: "[rank0]: ..."
TORCH_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")
# Container runtimes and CI systems put their own timestamp in front of each line.
COLLECTOR_TIMESTAMP = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? (?:\| )?"
)
# docker compose ("vllm-1  | "), Buildkite ("  | ") and similar collectors.
COLLECTOR_SERVICE = re.compile(r"^(?:\[?[\w.\-]+\]?)? *\| ")
# FastChat / loguru-style: "2024-03-22 02:41:50 | ERROR | stderr | " (the level is the stream's).
PIPE_LOGGER_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| [A-Z]+ +\| [\w.]+ \| ")
# Kernel log lines: "[ 2448.628961] " (dmesg) or "[Thu Aug 27 00:39:44 2026] " (dmesg -T).
KERNEL_TIMESTAMP = re.compile(r"^\[(?:\s*\d+\.\d+|\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\] ")
# A shell's report of a command that a signal ended: bash's for a script's command ("run.sh: line 5:
#  4711 Aborted (core dumped)  vllm serve ...") or a job ("[1]+  Killed   vllm serve ..."), zsh's for
# a prompt's ("zsh: killed  python -m ...") or a job ("[1]    3981644 illegal hardware instruction
# (core dumped)  vllm serve ...": the job, two spaces, its mark or a space, the pid).
SHELL_JOB_REPORT = re.compile(
    r"^(?:(?:\S+: line \d+: +\d+ |\[\d+\][+-]? +)"
    r"(?P<bash>Killed|Aborted|Illegal instruction|Segmentation fault|Bus error)"
    r"|(?:zsh: |\[\d+\]  [ +-] \d+ )"
    r"(?P<zsh>killed|abort|IOT instruction|illegal hardware instruction|segmentation fault|bus error))"
    r"(?P<core> +\(core dumped\))? +\S"
)
ZSH_SIGNAL_WORDS = {"killed": "Killed", "abort": "Aborted", "iot instruction": "Aborted",
                    "illegal hardware instruction": "Illegal instruction", "segmentation fault": "Segmentation fault",
                    "bus error": "Bus error"}
# Terminal colours, also as pasted ("\x1b[", "^[[", or the replacement character).
ANSI_COLOUR = re.compile(r"(?:\x1b|\^\[|\ufffd)\[[0-9;]*m|\[[0-9;]+m")
# A whole line between the same markdown emphasis marks, as pasted into an issue body.
MARKDOWN_EMPHASIS = re.compile(r"^\s*(?P<mark>\*\*|__|`)(?P<inner>\S.*?\S)(?P=mark)\s*$")
# A line quoted in an issue comment ("> (APIServer pid=1) ERROR ..."), perhaps quoted again.
QUOTE_MARK = r"(?:> ?)"
MARKDOWN_QUOTE = re.compile(rf"^{QUOTE_MARK}+")
# ERROR 11-30 14:52:01 [core.py:700] message   (vLLM repeats this on every line of a record);
# vLLM before 0.8: "ERROR 08-23 08:25:25 worker.py:226] message"; some builds drop the seconds.
VLLM_LEVEL_PREFIX = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<timestamp>\d\d-\d\d \d\d:\d\d(?::\d\d)?)(?:\.\d+)? "
    r"(?:\[(?P<source>[^\]]+)\]|(?P<old_source>[\w.\-/]+:\d+)\]) ?"
)
# uvicorn ("ERROR:    msg") and Python's default logging format ("ERROR:__main__:msg").
PLAIN_LEVEL_PREFIX = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):(?: +|[\w.]+:)")
# glog / torch C++ ("E0806 21:52:45.863589 1 file.cc:366] ", "[W409 11:42:27.776 file.cpp:1250] ").
GLOG_PREFIX = re.compile(
    r"^\[?(?P<severity>[IWEF])(?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?(?: +\d+)?)? [\w.\-/]+:\d+\] ?"
)
GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# Ray's own log format: "[2026-03-25 05:44:29,435 W 39 39] (raylet) ..."
RAY_LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<severity>[IWEF]) \d+ \d+\] ")
# NCCL's debug lines: "host:4711:4790 [0] misc/shmutils.cc:72 NCCL WARN message" (the file only in newer
# releases; a paste may start at either); the level word stays in the text, rules name "NCCL WARN".
NCCL_DEBUG_PREFIX = re.compile(
    r"^(?:[\w.\-]+:\d+:\d+ \[\d+\] )?(?:[\w./\-]+:\d+ )?(?=NCCL (?P<level>WARN|INFO|TRACE|ABORT)\b)"
)
# WARN carries NCCL's failures and its notices alike ("Got async event : GID table change"): no level,
# read like a raw line; INFO and TRACE are quiet.
NCCL_DEBUG_LEVELS = {"WARN": None, "INFO": "INFO", "TRACE": "DEBUG", "ABORT": "ERROR"}
# torch_npu / CANN: "[ERROR] 2026-05-22-08:25:51 (PID:274, Device:-1, RankID:-1) ERR99999 UNKNOWN ..."
ASCEND_LEVEL_PREFIX = re.compile(
    r"^\[(?P<level>ERROR|WARNING|WARN|INFO|DEBUG)\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d+)? "
    r"\(PID:\d+, Device:-?\d+, RankID:-?\d+\) "
)
# Job runners that tag lines with a level: "0s0n9esxgd0u45[error]worker exited ..."
TAGGED_LEVEL_PREFIX = re.compile(r"^\w+\[(?P<level>error|info|warning|debug)\]")
# Prefixes that carry a level and nothing else worth keeping, with what their level words mean
# (None: the word itself, WARN read as WARNING).
LEVEL_ONLY_PREFIXES: tuple[tuple[re.Pattern[str], dict[str, str | None] | None], ...] = (
    (NCCL_DEBUG_PREFIX, NCCL_DEBUG_LEVELS),
    (ASCEND_LEVEL_PREFIX, None),
    (PLAIN_LEVEL_PREFIX, None),
    (TAGGED_LEVEL_PREFIX, None),
)
# Nov 30 14:52:01 host python[1234]: message   (journalctl's default "short" output)
# 2026-11-30T14:52:01+0000 host python[1234]: message   (-o short-iso)
JOURNAL_TEXT_PREFIX = re.compile(
    r"^(?P<timestamp>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)"
    r" (?P<host>\S+) (?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<message>.*)$"
)
JOURNAL_MARKER = re.compile(r"^-- .* --$|^-- No entries --$")
# Structured records, one JSON object a line (container runtimes, Go and Python JSON loggers, docker's
# json-file log whose "log" holds the line as the program wrote it).
JSON_RECORD_LEVEL_KEYS = ("level", "severity", "levelname", "lvl")
# structlog writes its message as "event", GCP's log export as "textPayload"
JSON_RECORD_MESSAGE_KEYS = ("msg", "message", "log", "event", "textPayload")
JSON_RECORD_ERROR_KEYS = ("error", "err")
# A record that carries a traceback in a field is left as a raw line: its exception stays readable.
JSON_RECORD_TRACEBACK_KEYS = ("exc_info", "exception", "stack_trace", "stacktrace", "stack")
JSON_RECORD_LEVELS = {"trace": "DEBUG", "debug": "DEBUG", "info": "INFO", "notice": "INFO", "default": "INFO",
                      "warn": "WARNING", "warning": "WARNING", "error": "ERROR", "err": "ERROR",
                      "critical": "CRITICAL", "fatal": "CRITICAL", "panic": "CRITICAL", "dpanic": "CRITICAL",
                      "alert": "CRITICAL", "emergency": "CRITICAL"}
# pino's and bunyan's numbers: 10 trace ... 60 fatal
JSON_RECORD_LEVEL_NUMBERS = {10: "DEBUG", 20: "DEBUG", 30: "INFO", 40: "WARNING", 50: "ERROR", 60: "CRITICAL"}

TRACEBACK_START = "Traceback (most recent call last):"
TRUNCATED_TRACEBACK = "(traceback without a final exception line)"
CHAINED_EXCEPTION_MARKERS = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# An exception logged on its own line, without a traceback: "ValueError: ...".
BARE_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::\s.*)?$")
# An exception class that does not end in Error, named by its module: "triton.runtime.autotuner.OutOfResources: ...".
DOTTED_EXCEPTION_LINE = re.compile(r"^(?:[a-z_]\w*\.)+[A-Z]\w*: \S")
# The same, pasted after other text: "【BUG】：RuntimeError: ...", "> > OSError: ...", "`ValueError: ...`".
EMBEDDED_EXCEPTION = re.compile(
    r"(?:^|[\s\"'`(>：:])(?P<exception>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.*)$"
)
# A warning that says the program went on another way after the exception it quotes (one that
# retries has not, and a log cut during the retries has nothing better to show).
RECOVERED = re.compile(r"\b(?:falling back|fall(?:s|ing)? back to)\b", re.IGNORECASE)
# An assert statement's failure, which names nothing but the statement Python printed above it.
BARE_ASSERTION = re.compile(r"^(?:\w+\.)*AssertionError:?$")
CARET_LINE = re.compile(r"^[\^~]+$")
# What an exception line starts with: a class name, perhaps dotted, then ': ' or nothing ("KeyboardInterrupt").
EXCEPTION_NAME_START = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::\s|:?$)")
ASSERT_STATEMENT = re.compile(r"^assert\b")
# 'File ".../x.py", line N, in f' (faulthandler: 'line N in f'; Databricks: 'File <command-1>, line 5').
FRAME_LINE = re.compile(r'^\s*File (?:"[^"]*"|<[^>]*>|\S+), line \d+')
# The raising frame of a traceback pasted without its last line.
RAISE_STATEMENT = re.compile(r"^\s*raise \w")
LOGGED_FAILURE_LEVELS = ("ERROR", "CRITICAL")
# Words of a line that reports a failure, for raw lines without a level or an exception class.
SAYS_SOMETHING_FAILED = re.compile(
    r"\b(?:error|errno|fail\w*|fatal|cannot|can't|could ?n[o']t|unable|invalid|unsupported|unknown|missing"
    r"|not (?:supported|support|found|enough|allowed|valid|compatible|available)|does ?n[o']t|denied|refused"
    r"|warn\w*|killed|abort\w*|exceed\w*|insufficient|too (?:old|large|small|many|long)|no (?:space|such|route"
    r"|available|socket|kernel|valid)|out of memory|timed? ?out|died|dead|crash\w*|panic|illegal|mismatch"
    r"|terminat\w*|segmentation|core dumped|unreachable)\b",
    re.IGNORECASE,
)
# A printed configuration ("engine_args: AsyncEngineArgs(model=..., tokenizer=..., ...)",
# "Namespace(host=None, port=8000, ...)"): it names settings, not a failure.
CONFIGURATION_DUMP = re.compile(r"(?:\b\w+=[^,=]*, ){4}")
# Lines that only point elsewhere, never worth quoting as the exception message.
EXCEPTION_DETAIL_NOISE = re.compile(r"^\s*For further information visit ")
# NCCL's error message spans lines (its error name, "Last error:", then the failing call); the
# cause is on the line after "Last error:", so those lines belong to the exception.
NCCL_MESSAGE_CONTINUATION = re.compile(r"^(?:nccl\w+Error: |Last error:\s*$)")
# pydantic appends the whole input to a validation error; it only buries the message.
PYDANTIC_INPUT_TAIL = re.compile(r"(?<!\s)\s*\[type=[^\]]*?, input_value=.*$")
# Worker names, pids, ranks and sizes differ between otherwise identical worker tracebacks.
WORKER_VARYING_PARTS = (
    (re.compile(r"\b(?:Worker_TP|VllmWorker-|Worker_PP|Worker_DP|rank ?)\d+\b"), "<worker>"),
    (re.compile(r"pid=\d+"), "pid=<n>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
)


# ----------------------------------------------------------------------------- data model


@dataclass
class LogLine:
    """One line of the service's output, with journal and vLLM prefixes parsed off."""

    index: int
    raw: str  # the line as vLLM wrote it (journal prefix removed)
    text: str  # the message after vLLM's "(proc pid=N) LEVEL date [file:N] " prefixes
    process: str | None = None
    pid: int | None = None
    level: str | None = None
    timestamp: str | None = None
    source: str | None = None
    invocation_id: str | None = None

    @property
    def stream(self) -> tuple[str, int | None]:
        """Lines of one traceback share a stream: a vLLM process, or raw output of one pid."""
        if self.process is not None:
            return ("vllm", self.pid)
        return ("raw", self.pid)


@dataclass
class Pattern:
    id: str
    regex: re.Pattern[str]
    why: str
    # A lower-case literal every match contains: lets most lines skip the regex.
    hint: str | None = None
    # The same test for lower-cased text, case-sensitive: several times faster than IGNORECASE.
    folded: re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        self.search_lowered = (self.folded or self.regex).search


@dataclass
class CauseRule:
    cause_class: str
    regexes: list[re.Pattern[str]]
    root_cause: str
    remediation: str
    # A class's broad words ("attention ... backend"), read only in the chosen failure's own
    # exception and only when no other rule names a cause anywhere in the log.
    loose: bool = False
    # Its remedy fits its own messages only (getpwuid, a truncated shard, ...): not the class's
    # general remedy, which a loose rule and a likely class give.
    narrow: bool = False
    # A symptom of a cause printed elsewhere (a process that died, a timeout waiting for another):
    # any other cause the log's warnings and errors name outranks it. None: as its class is.
    weak: Optional[bool] = None
    # A request a running server refused (a prompt over --max-model-len): the failure where the log
    # shows no other, never the evidence for another (a long-lived journal holds many).
    refused_request: bool = False

    @property
    def outranked_by_other_evidence(self) -> bool:
        return self.weak if self.weak is not None else self.cause_class in WEAK_CLASSES


@dataclass
class Rules:
    benign: list[Pattern]
    wrappers: list[Pattern]
    fatal_lines: list[Pattern]
    stop_requested: list[Pattern]
    attempt_start: list[Pattern]
    causes: list[CauseRule]
    startup_progress: list[Pattern] = field(default_factory=list)
    startup_complete: list[Pattern] = field(default_factory=list)
    # fatal-line rules that name a failure inside a warning: such a line is not dropped as benign
    warnings_that_fail: list[Pattern] = field(default_factory=list)
    # fatal-line rules that name a failure vLLM logs at INFO ("No platform detected ...")
    info_lines_that_fail: list[Pattern] = field(default_factory=list)
    # the corpus's words per class (triage_words), asked when no rule names a cause
    word_model: Optional[WordModel] = None


@dataclass
class FailureEvent:
    """A traceback, or a single line that announces a failure, found in one stream."""

    kind: str  # "traceback" or "line"
    lines: list[LogLine]
    exceptions: list[str]  # exception texts, oldest first (chained tracebacks have several)
    exception_lines: list[LogLine]
    header: LogLine | None = None  # the logger message just before "Traceback ..."

    @property
    def first_index(self) -> int:
        return (self.header or self.lines[0]).index

    @property
    def stream(self) -> tuple[str, int | None]:
        return self.lines[0].stream

    @property
    def final_exception(self) -> str:
        return self.exceptions[-1]

    @property
    def truncated(self) -> bool:
        """A traceback pasted without its exception line."""
        return self.exceptions == [TRUNCATED_TRACEBACK]

    @property
    def cut_before_exception(self) -> bool:
        """A traceback pasted without its exception line, whether or not a raise statement was left."""
        return self.truncated or bool(RAISE_STATEMENT.match(self.final_exception))


@dataclass
class TriageReport:
    found: bool
    root_cause: str
    cause_class: str | None
    evidence: list[str]
    benign_suppressed: int
    # Duplicate tracebacks folded into the chosen one: N identical worker tracebacks give N - 1.
    workers_collapsed: int
    remediation: str
    traceback: list[str] = field(default_factory=list)
    wrappers_seen: int = 0
    benign_dropped: dict[str, int] = field(default_factory=dict)  # benign rule id -> lines
    # When no rule named the cause: the class the log's words resemble (triage_words), a hint
    # for the operator; nothing acts on it.
    likely_class: Optional[str] = None
    likely_remediation: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "found": self.found,
            "root_cause": self.root_cause,
            "class": self.cause_class,
            "evidence": list(self.evidence),
            "benign_suppressed": self.benign_suppressed,
            "workers_collapsed": self.workers_collapsed,
            "remediation": self.remediation,
            "traceback": list(self.traceback),
            "wrappers_seen": self.wrappers_seen,
            "benign_dropped": dict(self.benign_dropped),
            "likely_class": self.likely_class,
            "likely_remediation": self.likely_remediation,
        }

    @property
    def named_class(self) -> Optional[str]:
        """The class the operator is pointed to: the likely one where no rule named a cause."""
        return self.likely_class or self.cause_class


# ----------------------------------------------------------------------------- parsing


def parse_log(text: str) -> list[LogLine]:
    """Parse journalctl -o json, journalctl text, or a plain vLLM log (auto-detected)."""
    raw_lines = text.splitlines()
    log_format = detect_format(raw_lines)
    if log_format == "journal-json":
        entries = parse_journal_json(raw_lines)
    elif log_format == "journal-text":
        entries = parse_journal_text(raw_lines)
    else:
        entries = ((line, None, None, None) for line in raw_lines)
    return [
        parse_vllm_line(index, message, pid, timestamp, invocation)
        for index, (message, pid, timestamp, invocation) in enumerate(entries)
    ]


def detect_format(raw_lines: list[str]) -> str:
    sample = [line for line in raw_lines if line.strip()][:50]
    if not sample:
        return "plain"
    if sample[0].lstrip().startswith("{") and looks_like_journal_json(sample[0]):
        return "journal-json"
    journal_like = sum(1 for line in sample if JOURNAL_TEXT_PREFIX.match(line) or JOURNAL_MARKER.match(line))
    return "journal-text" if journal_like * 2 > len(sample) else "plain"


def looks_like_journal_json(line: str) -> bool:
    entry = decoded_object(line)
    return entry is not None and "MESSAGE" in entry


# message, pid, timestamp, invocation id (Optional, not `| None`: an alias is evaluated on import,
# and module_utils also import on Python 3.9 targets)
Entry = tuple[str, Optional[int], Optional[str], Optional[str]]


def parse_journal_json(raw_lines: list[str]) -> Iterator[Entry]:
    for line in raw_lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            yield (line, None, None, None)
            continue
        if not isinstance(entry, dict):
            continue
        pid = to_int(entry.get("_PID"))
        timestamp = realtime_to_iso(entry.get("__REALTIME_TIMESTAMP"))
        invocation = entry.get("_SYSTEMD_INVOCATION_ID") or entry.get("INVOCATION_ID")
        for message_line in journal_message_text(entry.get("MESSAGE")).splitlines() or [""]:
            yield (message_line, pid, timestamp, invocation)


def journal_message_text(message: Any) -> str:
    """journald stores non-UTF-8 (and some control-character) messages as a list of byte values."""
    if message is None:
        return ""
    if isinstance(message, str):
        return message
    if isinstance(message, list):
        try:
            return bytes(int(value) & 0xFF for value in message).decode("utf-8", errors="replace")
        except (TypeError, ValueError):
            return " ".join(str(value) for value in message)
    return str(message)


def realtime_to_iso(value: Any) -> str | None:
    microseconds = to_int(value)
    if microseconds is None:
        return None
    return datetime.fromtimestamp(microseconds / 1_000_000, tz=timezone.utc).isoformat()


def to_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_journal_text(raw_lines: list[str]) -> Iterator[Entry]:
    for line in raw_lines:
        if JOURNAL_MARKER.match(line):
            continue
        match = JOURNAL_TEXT_PREFIX.match(line)
        if match:
            yield (match["message"], to_int(match["pid"]), match["timestamp"], None)
        else:
            yield (line, None, None, None)


def parse_vllm_line(
    index: int, message: str, pid: int | None, timestamp: str | None, invocation: str | None
) -> LogLine:
    # vLLM ends continuation lines of multi-line records with "\r"; journald keeps it.
    raw = message.rstrip("\r\n")
    line = LogLine(index=index, raw=raw, text=raw, pid=pid, timestamp=timestamp, invocation_id=invocation)
    rest = strip_collector_prefixes(ANSI_COLOUR.sub("", raw) if "m" in raw and "[" in raw else raw)
    rest = strip_process_prefixes(line, rest)
    rest = strip_level_prefix(line, rest)
    text = rest.rstrip("\r")
    line.text = shell_signal_words(text) if line.level is None else text
    return line


def shell_signal_words(text: str) -> str:
    """A shell's report of a command that died by a signal, as the shell's own words for the signal
    ("Aborted (core dumped)"): the command's arguments are no evidence of the cause."""
    match = SHELL_JOB_REPORT.match(text) if ": line " in text or text.startswith(("zsh: ", "[")) else None
    if match is None:
        return text
    words = match["bash"] or ZSH_SIGNAL_WORDS[match["zsh"].lower()]
    return words + (" (core dumped)" if match["core"] else "")


def strip_markdown_emphasis(rest: str) -> str:
    """A line pasted into an issue as **bold** or `code` loses the marks (both ends, the same mark),
    a quoted one its quote marks."""
    if rest[:1] == ">":
        rest = MARKDOWN_QUOTE.sub("", rest, count=1)
    match = MARKDOWN_EMPHASIS.match(rest)
    return match["inner"] if match else rest


def strip_collector_prefixes(rest: str) -> str:
    rest = strip_markdown_emphasis(rest)
    for pattern in (PIPE_LOGGER_PREFIX, COLLECTOR_TIMESTAMP, COLLECTOR_SERVICE, KERNEL_TIMESTAMP):
        rest = pattern.sub("", rest, count=1)
    return rest.lstrip(" ") if rest[:2] == " (" else rest


def strip_process_prefixes(line: LogLine, rest: str) -> str:
    """Take off "(proc pid=N)" tags (Ray nests several) and torch's "[rankN]:"."""
    while True:
        rest = TORCH_RANK_PREFIX.sub("", rest, count=1)
        match = VLLM_PROCESS_PREFIX.match(rest)
        if match:
            line.process = match["process"]
            line.pid = int(match["pid"])
        else:
            match = RAY_DAEMON_PREFIX.match(rest)
            if not match:
                return rest
            line.process = match["process"]
        rest = rest[match.end():]


def strip_level_prefix(line: LogLine, rest: str) -> str:
    # A pasted fragment may start with stray spaces in front of the level prefix.
    candidate = rest.lstrip(" ") if rest[:1] == " " else rest
    if candidate[:1] == "{":
        record = json_record(candidate)
        if record is not None:
            line.level, message = record
            # the program's own prefixes inside the record ("ERROR 06-03 ... [core.py:1] ...") say more
            return strip_level_prefix(line, strip_process_prefixes(line, message))
    match = VLLM_LEVEL_PREFIX.match(candidate)
    if match:
        line.level = match["level"]
        line.timestamp = match["timestamp"]
        line.source = match["source"] or match["old_source"]
        message = strip_process_prefixes(line, candidate[match.end():])
        # vLLM logging torch_npu's own line: "ERROR ... engine.py:389] [ERROR] 2025-... (PID:..) ERR00100 ..."
        inner = ASCEND_LEVEL_PREFIX.match(message)
        return message[inner.end():] if inner else message
    for pattern in (GLOG_PREFIX, RAY_LOG_PREFIX):
        match = pattern.match(candidate)
        if match:
            line.level = GLOG_LEVELS[match["severity"]]
            return strip_process_prefixes(line, candidate[match.end():])
    for pattern, meanings in LEVEL_ONLY_PREFIXES:
        match = pattern.match(candidate)
        if match:
            line.level = level_named(match["level"], meanings)
            return candidate[match.end():]
    return rest


def level_named(word: str, meanings: dict[str, str | None] | None) -> str | None:
    if meanings is not None:
        return meanings[word]
    word = word.upper()
    return "WARNING" if word == "WARN" else word


def json_record(text: str) -> tuple[str | None, str] | None:
    """The level (None where the record has none, as docker's json-file) and message of a
    structured record ('{"level": "error", "msg": ...}'); a Go logger's separate "error" field is
    appended to the message."""
    record = decoded_object(text)
    if record is None or any(key in record for key in JSON_RECORD_TRACEBACK_KEYS):
        return None
    message = first_string(record, JSON_RECORD_MESSAGE_KEYS)
    level = json_record_level(record)
    if message is None or (level is None and "log" not in record):
        return None
    error = first_string(record, JSON_RECORD_ERROR_KEYS)
    message = message.rstrip("\r\n")
    return level, f"{message}: {error}" if error and not message.endswith(error) else message


def decoded_object(text: str) -> dict[str, Any] | None:
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):  # a line of thousands of nested brackets
        return None
    return record if isinstance(record, dict) else None


def json_record_level(record: dict[str, Any]) -> str | None:
    for key in JSON_RECORD_LEVEL_KEYS:
        value = record.get(key)
        if isinstance(value, str) and value.lower() in JSON_RECORD_LEVELS:
            return JSON_RECORD_LEVELS[value.lower()]
        if isinstance(value, int) and value in JSON_RECORD_LEVEL_NUMBERS:
            return JSON_RECORD_LEVEL_NUMBERS[value]
    return None


def first_string(record: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((record[key] for key in keys if isinstance(record.get(key), str)), None)


# ----------------------------------------------------------------------------- rules


def load_rules(path: str | Path) -> Rules:
    """Read and validate the rules data file (JSON)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return rules_from_data(data)


def rules_from_data(data: dict[str, Any]) -> Rules:
    fatal_patterns = {entry["id"]: entry["pattern"] for entry in data.get("fatal_lines", [])}
    entries = data.get("causes", [])
    remedies = lendable_remedies(entries)
    causes = [cause_rule(entry, fatal_patterns, remedies) for entry in entries]
    refuse_unknown_classes([rule.cause_class for rule in causes], "rules")
    if not any(rule.cause_class == FALLBACK_CLASS and not rule.regexes for rule in causes):
        raise ValueError(f"rules need an '{FALLBACK_CLASS}' cause without patterns as the fallback")
    for rule in causes:
        if not rule.remediation:  # a loose rule gives its class's general remedy
            rule.remediation = general_remediation(rule.cause_class, causes)
    return Rules(
        benign=[named_pattern(entry) for entry in data.get("benign", [])],
        wrappers=[named_pattern(entry) for entry in data.get("wrappers", [])],
        fatal_lines=[named_pattern(entry) for entry in data.get("fatal_lines", [])],
        stop_requested=[named_pattern(entry) for entry in data.get("stop_requested", [])],
        attempt_start=[named_pattern(entry) for entry in data.get("attempt_start", [])],
        causes=causes,
        startup_progress=[named_pattern(entry) for entry in data.get("startup_progress", [])],
        startup_complete=[named_pattern(entry) for entry in data.get("startup_complete", [])],
        warnings_that_fail=[named_pattern(entry) for entry in data.get("fatal_lines", [])
                            if entry.get("keeps_benign")],
        info_lines_that_fail=[named_pattern(entry) for entry in data.get("fatal_lines", []) if entry.get("at_info")],
        word_model=word_model_from_rules(data.get("word_model")),
    )


def word_model_from_rules(data: Optional[dict[str, Any]]) -> Optional[WordModel]:
    if not data:
        return None
    model = model_from_data(data)
    refuse_unknown_classes(model.logs_per_class, "word_model")
    return model


def refuse_unknown_classes(names: Iterable[str], where: str) -> None:
    unknown = sorted(set(names) - set(CAUSE_CLASSES))
    if unknown:
        raise ValueError(f"unknown cause classes in {where}: {', '.join(unknown)}")


def named_pattern(entry: dict[str, Any]) -> Pattern:
    hint = entry.get("hint") or literal_hint(entry["pattern"])
    return Pattern(id=entry["id"], regex=compile_pattern(entry["pattern"]), why=entry.get("why", ""),
                   hint=hint.lower() if hint else None, folded=folded_regex(entry["pattern"]))


def folded_regex(pattern: str) -> re.Pattern[str] | None:
    """The pattern for lower-cased text: literals lower-cased, escapes (\\S, \\D, \\W ...) and group
    names kept; None where that is not safe (named characters), so the IGNORECASE regex is used."""
    if "\\N{" in pattern:
        return None
    folded: list[str] = []
    position = 0
    while position < len(pattern):
        if pattern[position] == "\\":
            folded.append(pattern[position:position + 2])
            position += 2
        elif pattern.startswith(("(?P<", "(?P="), position):
            end = pattern.index(">" if pattern[position + 3] == "<" else ")", position)
            folded.append(pattern[position:end + 1])
            position = end + 1
        else:
            folded.append(pattern[position].lower())
            position += 1
    try:
        return re.compile("".join(folded))
    except re.error:
        return None


REGEX_SPECIAL = set(".^$*+?{}[]|()\\")


def literal_hint(pattern: str) -> str | None:
    """The longest literal run outside groups of a pattern without top-level alternatives,
    lower-cased (patterns match case-insensitively); None when there is no safe one."""
    runs: list[str] = []
    current: list[str] = []
    depth = 0
    position = 0
    while position < len(pattern):
        char = pattern[position]
        if char == "\\":
            runs.append("".join(current))
            current = []
            position += 2
            continue
        if char in "*?{" or (char == "+" and current):
            if current:
                current.pop()  # the quantified character is optional or repeated
            runs.append("".join(current))
            current = []
        elif char == "(":
            runs.append("".join(current))
            current = []
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return None
        elif char == "[":
            runs.append("".join(current))
            current = []
            position = pattern.find("]", position + 2) if "]" in pattern[position + 2:] else len(pattern)
        elif depth == 0 and char not in REGEX_SPECIAL:
            current.append(char)
        elif char in REGEX_SPECIAL:
            runs.append("".join(current))
            current = []
        position += 1
    runs.append("".join(current))
    best = max(runs, key=len)
    return best.lower() if len(best) >= 4 else None


def cause_rule(entry: dict[str, Any], fatal_patterns: dict[str, str], remedies: dict[str, str]) -> CauseRule:
    """A cause rule; its 'fatal_lines' (ids) add those fatal-line rules' patterns, so a failure line
    that is its own cause is written once; 'remediation_of' (a cause's id) shares that cause's remedy."""
    patterns = entry.get("patterns", [])
    if "pattern" in entry:
        patterns = [entry["pattern"], *patterns]
    patterns = [*patterns, *(referenced(fatal_patterns, name, "fatal line", entry) for name in entry.get("fatal_lines", []))]
    remediation = entry.get("remediation", "")
    if "remediation_of" in entry:
        remediation = referenced(remedies, entry["remediation_of"], "cause", entry)
    return CauseRule(
        cause_class=entry["class"],
        regexes=[compile_pattern(pattern) for pattern in patterns],
        root_cause=entry.get("root_cause", "{exception}"),
        remediation=remediation,
        loose=bool(entry.get("loose", False)),
        narrow=bool(entry.get("narrow", False)),
        weak=entry.get("weak"),
        refused_request=bool(entry.get("refused_request", False)),
    )


def lendable_remedies(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Cause id -> its own remediation; an id given twice, a cause with both a remediation and
    'remediation_of', and a 'remediation_of' naming a cause without a remediation of its own are
    refused (each would silently give another remedy than the one written)."""
    remedies: dict[str, str] = {}
    for entry in entries:
        if "remediation" in entry and "remediation_of" in entry:
            raise ValueError(f"the {rule_name(entry)} has both a remediation and 'remediation_of'")
        if "id" in entry:
            if entry["id"] in remedies:
                raise ValueError(f"two cause rules have the id '{entry['id']}'")
            remedies[entry["id"]] = entry.get("remediation", "")
    for entry in entries:
        lender = entry.get("remediation_of")
        if lender in remedies and not remedies[lender]:
            raise ValueError(f"the {rule_name(entry)} borrows the remediation of '{lender}', which has none of its own")
    return remedies


def rule_name(entry: dict[str, Any]) -> str:
    """How messages name a cause rule: its class, then its id, else its first pattern."""
    patterns = [entry["pattern"]] if "pattern" in entry else entry.get("patterns", [])
    label = f"'{entry['id']}'" if "id" in entry else f"/{patterns[0]}/" if patterns else "(no patterns of its own)"
    return f"{entry['class']} cause rule {label}"


def referenced(known: dict[str, str], name: str, kind: str, entry: dict[str, Any]) -> str:
    if name not in known:
        raise ValueError(f"the {rule_name(entry)} names the {kind} '{name}', which the rules do not have")
    return known[name]


def compile_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def first_matching(patterns: Iterable[Pattern], text: str, lowered: str | None = None) -> Pattern | None:
    """The first pattern that occurs in the text (`lowered`: the text lower-cased, if already at hand)."""
    lowered = text.lower() if lowered is None else lowered
    for pattern in patterns:  # the streaming pass runs this for every line: kept to plain loops
        if (pattern.hint is None or pattern.hint in lowered) and pattern.search_lowered(lowered):
            return pattern
    return None


# ----------------------------------------------------------------------------- noise


def drop_benign(lines: list[LogLine], rules: Rules) -> tuple[list[LogLine], Counter[str]]:
    """Remove lines matched by benign rules (not one a fatal-line rule names); also the indented
    source line that Python's warnings module prints under a warning ("  warnings.warn("). Counts
    per rule id."""
    kept: list[LogLine] = []
    dropped: Counter[str] = Counter()
    last_benign: tuple[tuple[str, int | None], str] | None = None
    for line in lines:
        continues_benign = (
            last_benign is not None and last_benign[0] == line.stream
            and line.text[:1].isspace() and line.text.strip() != ""
        )
        pattern = None if continues_benign else first_matching(rules.benign, line.text)
        if pattern is not None and first_matching(rules.warnings_that_fail, line.text) is not None:
            pattern = None  # a warning a fatal rule names (the hub's "Not enough free disk space") stays
        if continues_benign or pattern is not None:
            rule_id = last_benign[1] if continues_benign and last_benign else pattern.id  # type: ignore[union-attr]
            dropped[rule_id] += 1
            last_benign = (line.stream, rule_id)
            continue
        last_benign = None
        kept.append(line)
    return kept, dropped


# ----------------------------------------------------------------------------- failure events


def find_failure_events(lines: list[LogLine], rules: Rules) -> list[FailureEvent]:
    """All tracebacks (per stream) and single fatal lines, in order of first appearance."""
    events: list[FailureEvent] = []
    in_traceback: set[int] = set()
    for stream_lines in split_streams(lines).values():
        for event in tracebacks_in_stream(stream_lines):
            events.append(event)
            in_traceback.update(line.index for line in event.lines)
            if event.header is not None:
                in_traceback.add(event.header.index)
    for position, line in enumerate(lines):
        if line.index not in in_traceback and is_fatal_line(line, rules):
            events.append(line_event(lines, position, in_traceback))
    return sorted(events, key=lambda event: event.first_index)


def line_event(lines: list[LogLine], position: int, in_traceback: set[int]) -> FailureEvent:
    """A fatal line, with the indented or wrapped lines that continue its message."""
    line = lines[position]
    text = line.text.strip()
    embedded = EMBEDDED_EXCEPTION.search(text)
    if embedded and not BARE_EXCEPTION_LINE.match(text) and line.level not in LOGGED_FAILURE_LEVELS:
        text = embedded["exception"]
    text = explained_assertion(text, [before for before in lines[max(0, position - 2):position]
                                      if before.stream == line.stream])
    event_lines = [line]
    lists_details = text.endswith(":")
    limit = LISTED_DETAILS_MAX if lists_details else LINE_CONTINUATION_MAX
    for following in lines[position + 1:position + 1 + limit]:
        # NCCL's failing call, after "Last error:", is read as the header of the traceback below.
        ends_nccl_message = event_lines[-1].text.strip() == "Last error:"
        if (following.index in in_traceback and not ends_nccl_message) or following.stream != line.stream:
            break
        if not continues_message(following, lists_details) and not continues_nccl_message(following.text, event_lines):
            break
        text = f"{text} {following.text.strip()}"
        event_lines.append(following)
    return FailureEvent(kind="line", lines=event_lines, exceptions=[text], exception_lines=event_lines)


def explained_assertion(text: str, lines_before: list[LogLine]) -> str:
    """A bare AssertionError with the assert statement printed above it (a traceback's source
    line, under Python 3.11's carets)."""
    if not BARE_ASSERTION.match(text):
        return text
    for line in reversed(lines_before):
        stripped = line.text.strip()
        if stripped and not CARET_LINE.match(stripped):
            return f"{text.rstrip(':')}: {stripped}" if ASSERT_STATEMENT.match(stripped) else text
    return text


def continues_message(line: LogLine, listing: bool = False) -> bool:
    """"  at torch/_inductor/utils.py:3442 ..." under an exception, or a line a terminal wrapped;
    under a message that announces a list (`listing`), any raw line. A Python frame is the stack
    that follows (a reported segfault's), not the message."""
    text = line.text
    if not text.strip() or line.level is not None or is_frame_line(line):
        return False
    if listing:
        return True
    # "cupy_backends.cuda.libs.nccl.NcclError: ..." is the next failure, not this one's wrapped words
    return not names_an_exception(text) and (text[:1].isspace() or text[:1].islower())


def split_attempts(lines: list[LogLine], rules: Rules) -> list[list[LogLine]]:
    """Cut the log where a new start attempt begins (new invocation id or vLLM's start banner)."""
    attempts: list[list[LogLine]] = [[]]
    for line in lines:
        current = attempts[-1]
        new_invocation = (
            bool(current) and line.invocation_id is not None
            and current[-1].invocation_id is not None and line.invocation_id != current[-1].invocation_id
        )
        new_banner = first_matching(rules.attempt_start, line.text) is not None and any(
            first_matching(rules.attempt_start, earlier.text) for earlier in current
        )
        if new_invocation or new_banner:
            attempts.append([])
        attempts[-1].append(line)
    return attempts


def requested_stop(lines: list[LogLine], rules: Rules) -> int | None:
    """The index of the first line that asks the service to stop (systemctl stop, SIGTERM)."""
    return next((line.index for line in lines if first_matching(rules.stop_requested, line.text)), None)


def events_before(events: list[FailureEvent], stop: int | None) -> list[FailureEvent]:
    """A stop on request (SIGTERM) makes vLLM log EngineDeadError and friends: not a failure."""
    return events if stop is None else [event for event in events if event.first_index < stop]


def split_streams(lines: list[LogLine]) -> dict[tuple[str, int | None], list[LogLine]]:
    streams: dict[tuple[str, int | None], list[LogLine]] = {}
    for line in lines:
        streams.setdefault(line.stream, []).append(line)
    return streams


def names_an_exception(text: str) -> bool:
    """'ValueError: ...', 'OSError', 'triton.runtime.autotuner.OutOfResources: ...' on its own."""
    return bool(BARE_EXCEPTION_LINE.match(text) or DOTTED_EXCEPTION_LINE.match(text))


def is_fatal_line(line: LogLine, rules: Rules) -> bool:
    text = line.text.strip()
    if not text:
        return False
    if line.level in LOGGED_FAILURE_LEVELS:
        return True
    if line.level in QUIET_LEVELS:
        return first_matching(rules.info_lines_that_fail, text) is not None
    if has_recovered(line):
        return False
    if names_an_exception(text) or first_matching(rules.fatal_lines, text) is not None:
        return True
    # Indented lines are traceback frames or a warning's source line, unless they carry an
    # exception of their own (a fragment pasted with leading spaces).
    if is_frame_line(line) or text.startswith(("raise ", "return ")):
        return False
    return bool(EMBEDDED_EXCEPTION.search(text))


def has_recovered(line: LogLine) -> bool:
    """A warning that the program went on another way ("Failed to use X (TypeError: ...); falling
    back"): whatever it quotes was handled, so it is no failure nor a cause's evidence."""
    return line.level == "WARNING" and RECOVERED.search(line.text) is not None


def tracebacks_in_stream(lines: list[LogLine]) -> Iterator[FailureEvent]:
    """Walk one stream's lines and cut out Python tracebacks, chained ones as one event."""
    position = 0
    while position < len(lines):
        line = lines[position]
        if line.text.strip() == TRACEBACK_START:
            event, position = read_traceback(lines, position, header_before(lines, position))
            yield event
        elif is_frame_line(line):  # perhaps a traceback pasted without its first lines
            event, end = read_traceback(lines, position, None)
            if ends_in_an_exception(event):
                yield event
            position = end
        else:
            position += 1


def ends_in_an_exception(event: FailureEvent) -> bool:
    """Frames without their 'Traceback' line are a traceback only when an exception line ends them
    (not, say, a logger's stack dump followed by its next INFO line)."""
    if not event.exception_lines or event.exception_lines[0].level in QUIET_LEVELS:
        return False
    text = event.exception_lines[0].text.strip()
    return names_an_exception(text) or bool(EMBEDDED_EXCEPTION.search(text))


def header_before(lines: list[LogLine], position: int) -> LogLine | None:
    """vLLM's logger.exception("EngineCore failed to start.") prints its message first."""
    if position == 0:
        return None
    previous = lines[position - 1]
    text = previous.text
    if not text.strip() or text[:1].isspace() or text.strip() == TRACEBACK_START:
        return None
    if names_an_exception(text.strip()):
        return None  # the end of an earlier traceback
    if previous.level in ("WARNING", *QUIET_LEVELS):
        return None  # a warning logged with its traceback was survived; the next failure is not about it
    return previous


def read_traceback(lines: list[LogLine], start: int, header: LogLine | None) -> tuple[FailureEvent, int]:
    block: list[LogLine] = []
    exceptions: list[str] = []
    exception_lines: list[LogLine] = []
    expecting_exception = is_frame_line(lines[start])
    position = start
    while position < len(lines):
        line = lines[position]
        text = line.text
        stripped = text.strip()
        if stripped == TRACEBACK_START:
            if block and not expecting_exception and not chained_marker_just_seen(block):
                break  # a new, unrelated traceback
            expecting_exception = True
        elif stripped in CHAINED_EXCEPTION_MARKERS or not stripped:
            pass
        elif expecting_exception and is_frame_line(line):
            pass  # a frame pasted without its indentation
        elif expecting_exception and is_flat_source_line(line, block):
            pass
        elif text[:1].isspace():
            if not expecting_exception and exceptions:
                if not EXCEPTION_DETAIL_NOISE.match(text):
                    exceptions[-1] = f"{exceptions[-1]} {stripped}"
                    exception_lines.append(line)
        elif expecting_exception:
            exceptions.append(explained_assertion(stripped, block))
            exception_lines.append(line)
            expecting_exception = False
        elif exceptions and continues_nccl_message(text, block):
            exceptions[-1] = f"{exceptions[-1]} {stripped}"
            exception_lines.append(line)
        else:
            break  # first ordinary line after the exception: the traceback is over
        block.append(line)
        position += 1
    if not exceptions:
        # A paste cut before the last line: the raising statement is the best clue left.
        raising = next((line for line in reversed(block) if RAISE_STATEMENT.match(line.text)), None)
        exceptions = [raising.text.strip() if raising else TRUNCATED_TRACEBACK]
        exception_lines = [raising] if raising else block[-1:]
    event = FailureEvent(kind="traceback", lines=block, exceptions=exceptions,
                         exception_lines=exception_lines, header=header)
    return event, position


def is_flat_source_line(line: LogLine, block: list[LogLine]) -> bool:
    """The source line under a frame, both pasted without their indentation ('File "x.py", line
    8, in <module>' then 'sys.exit(main())'): it follows an unindented frame and names no exception."""
    return (bool(block) and is_frame_line(block[-1]) and not block[-1].text[:1].isspace()
            and not EXCEPTION_NAME_START.match(line.text.strip()))


def continues_nccl_message(text: str, block: list[LogLine]) -> bool:
    after_last_error = bool(block) and block[-1].text.strip() == "Last error:"
    return after_last_error or bool(NCCL_MESSAGE_CONTINUATION.match(text))


def chained_marker_just_seen(block: list[LogLine]) -> bool:
    for line in reversed(block):
        stripped = line.text.strip()
        if not stripped:
            continue
        return stripped in CHAINED_EXCEPTION_MARKERS
    return False


def is_wrapper(text: str, rules: Rules) -> bool:
    return first_matching(rules.wrappers, text) is not None


def wrapped_cause(text: str, rules: Rules) -> str | None:
    """The cause a wrapper quotes ("Worker failed with error 'X', please check ..."), if any."""
    for pattern in rules.wrappers:
        if "cause" not in pattern.regex.groupindex:
            continue
        for match in pattern.regex.finditer(text):
            cause = match["cause"]
            if cause and cause.strip():
                return cause.strip()
    return None


def real_exceptions(event: FailureEvent, rules: Rules) -> list[str]:
    """The event's exception texts that are not generic wrappers, oldest first; a wrapper
    that quotes the worker's error contributes that error."""
    texts = []
    for text in event.exceptions:
        if not is_wrapper(text, rules):
            texts.append(text)
            continue
        cause = wrapped_cause(text, rules)
        if cause:
            texts.append(cause)
    return texts


def worker_signature(text: str) -> str:
    for pattern, replacement in WORKER_VARYING_PARTS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def is_refused_request(event: FailureEvent, rules: Rules) -> bool:
    refusals = [regex for rule in rules.causes if rule.refused_request for regex in rule.regexes]
    exceptions = real_exceptions(event, rules)
    return bool(exceptions) and all(any(regex.search(flat) for regex in refusals) for flat in map(one_line, exceptions))


def choose_event(events: list[FailureEvent], rules: Rules) -> FailureEvent | None:
    """The first real traceback that ends in its exception; else a single fatal line (which names
    what a traceback cut before its last line only hints at); else the first real event."""
    real = [event for event in events if real_exceptions(event, rules)]
    # a request the running server refused is the failure only where nothing else failed
    failed = [event for event in real if not is_refused_request(event, rules)]
    real = failed or real
    tracebacks = [event for event in real if event.kind == "traceback" and not event.cut_before_exception]
    if tracebacks:
        return tracebacks[0]
    single_lines = [event for event in real if event.kind != "traceback"]
    # Of a traceback logged line by line at ERROR (its start cut off), the exception line.
    exception_lines = [event for event in single_lines if names_an_exception(event.final_exception)]
    if exception_lines or single_lines:
        return (exception_lines or single_lines)[0]
    return real[0] if real else None


def duplicates_of(chosen: FailureEvent, events: list[FailureEvent], rules: Rules) -> list[FailureEvent]:
    """Tracebacks from other processes that end with the same exception (per-worker copies)."""
    signature = worker_signature(real_exceptions(chosen, rules)[-1])
    seen_streams = {chosen.stream}
    duplicates = []
    for event in events:
        if event is chosen or event.kind != chosen.kind or event.stream in seen_streams:
            continue
        texts = real_exceptions(event, rules)
        if texts and worker_signature(texts[-1]) == signature:
            duplicates.append(event)
            seen_streams.add(event.stream)
    return duplicates


# ----------------------------------------------------------------------------- classification


@dataclass
class Classification:
    rule: CauseRule
    exception: str


def classify(event: FailureEvent, rules: Rules) -> Classification:
    """First cause rule (in file order) that matches any real exception of the event."""
    exceptions = list(reversed(real_exceptions(event, rules)))  # newest first
    candidates = exceptions + ([event.header.text.strip()] if event.header is not None else [])
    # Where an exception no rule knows was raised (".../attention/backends/flashinfer.py") is a
    # loose hint at its class; the exception stays the root cause.
    frame = raising_frame(event)
    for rule in rules.causes:
        # a class's broad words count in the failure's own exception, not in the message logged above it
        for text in exceptions if rule.loose else candidates:
            if any(regex.search(one_line(text)) for regex in rule.regexes):
                return Classification(rule=rule, exception=text)
        if rule.loose and frame and any(regex.search(frame) for regex in rule.regexes):
            return Classification(rule=rule, exception=candidates[0])
    fallback = fallback_rule(rules)
    return Classification(rule=fallback, exception=candidates[0])


def is_frame_line(line: LogLine) -> bool:
    """'File ".../x.py", line N, in f' of a Python traceback."""
    return bool(FRAME_LINE.match(line.text))


def raising_frame(event: FailureEvent) -> str | None:
    """The innermost frame of the event's last exception: 'File ".../x.py", line N, in f'."""
    if event.kind != "traceback" or not event.exception_lines:
        return None
    last = event.exception_lines[-1].index
    frames = [line for line in event.lines if line.index < last and is_frame_line(line)]
    return frames[-1].text.strip() if frames else None


def specific_rule(
    texts: Iterable[str], rules: Rules, exclude: set[str] | None = None, refused_requests: bool = True
) -> Classification | None:
    """First non-fallback, non-loose cause rule (in file order) that matches one of the texts."""
    candidates = [(text, one_line(text)) for text in texts if text.strip()]
    for rule in rules.causes:
        if not rule.regexes or rule.loose or (exclude and rule.cause_class in exclude):
            continue
        if rule.refused_request and not refused_requests:
            continue
        for text, flat in candidates:
            if any(regex.search(flat) for regex in rule.regexes):
                return Classification(rule=rule, exception=text)
    return None


def secondary_classification(
    events: list[FailureEvent], kept: list[LogLine], rules: Rules, exclude: Iterable[str] = (),
    just_before: Iterable[LogLine] = (),
) -> Classification | None:
    """When no real exception names a known cause: the warnings and errors around it, the
    non-wrapper ones first (a wrapper's list of possible causes is the last resort); for a
    symptom, also the raw lines `just_before` it."""
    texts = [line.text.strip() for line in just_before if line.level is None and not is_frame_line(line)]
    texts += [text for event in events for text in event.exceptions]
    # The frames and source lines of a traceback that ends in its exception (logged at ERROR line
    # by line) name files, not causes; of a traceback cut before its exception they are all there is.
    frames = {line.index for event in events if event.kind == "traceback" and not event.cut_before_exception
              for line in event.lines}
    frames -= {line.index for event in events for line in event.exception_lines}
    texts += [line.text.strip() for line in kept
              if line.level in SECONDARY_LEVELS and line.index not in frames and not has_recovered(line)]
    # A pasted (unlogged) traceback cut before its exception: its source lines are the evidence left.
    texts += [line.text.strip() for event in events if event.kind == "traceback" and event.cut_before_exception
              for line in event.lines if line.level is None and not is_frame_line(line)]
    plain = [text for text in texts if not is_wrapper(text, rules)]
    excluded = set(exclude)
    # where something else failed, a request the server refused is no evidence of why
    alone = not events
    return (specific_rule(plain, rules, excluded, refused_requests=alone)
            or specific_rule([t for t in texts if is_wrapper(t, rules)], rules, excluded, refused_requests=alone))


def lines_before_a_symptom(
    chosen: FailureEvent | None, classification: Classification | None, kept: list[LogLine]
) -> list[LogLine]:
    """The lines printed just before a weak rule's failure, in its stream: a library that reports
    a symptom ("NCCL error: unhandled cuda error") logs its reason there ("NCCL WARN Cuda failure 2
    out of memory")."""
    if chosen is None or classification is None or not classification.rule.outranked_by_other_evidence:
        return []
    first = chosen.first_index
    before = [line for line in kept if line.index < first and line.stream == chosen.stream]
    return before[-SYMPTOM_REASON_LINES:]


def weak_classes(classification: Classification | None) -> tuple[str, ...]:
    """Classes the warnings and errors around a failure may not name in its place: the weak ones,
    and a weak rule's own (its symptom seen again elsewhere is no other cause)."""
    if classification is None:
        return ()
    if classification.rule.outranked_by_other_evidence:
        return (*WEAK_CLASSES, classification.rule.cause_class)
    return WEAK_CLASSES


def fallback_rule(rules: Rules) -> CauseRule:
    return next(rule for rule in reversed(rules.causes) if rule.cause_class == FALLBACK_CLASS and not rule.regexes)


def render_root_cause(classification: Classification, workers: int) -> str:
    exception = one_line(classification.exception)
    text = classification.rule.root_cause.format_map(SafeTemplateValues(exception=exception))
    if workers > 1:
        text = f"{workers} workers: {text}"
    return shorten(text, ROOT_CAUSE_MAX_CHARS)


class SafeTemplateValues(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def one_line(text: str) -> str:
    text = PYDANTIC_INPUT_TAIL.sub("", text)
    return " ".join(text.split())


def shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


# ----------------------------------------------------------------------------- report


def triage(lines: list[LogLine], rules: Rules, benign_before: Counter[str] | None = None) -> TriageReport:
    """Name the root cause of the failure shown in `lines` (from parse_log).

    `benign_before` counts benign lines already dropped by the streaming reader."""
    kept, benign_ids = drop_benign(lines, rules)
    not_benign = kept
    if benign_before:
        benign_ids.update(benign_before)
    benign_suppressed = sum(benign_ids.values())
    attempts = split_attempts(kept, rules)
    # Under Restart= a journal holds several start attempts: the latest failed one counts. A request
    # the running server refused (a prompt over the context, a 404) is no failure of the server:
    # where anything else happened it is no evidence; of a latest attempt that failed nothing else
    # and was not stopped on request, the clients turned away are all there is to tell.
    events: list[FailureEvent] = []
    refused: list[FailureEvent] = []
    for attempt in reversed(attempts):
        stop = requested_stop(attempt, rules)
        found = events_before(find_failure_events(attempt, rules), stop)
        events = [event for event in found if not is_refused_request(event, rules)]
        if events:
            kept = attempt
            break
        if attempt is attempts[-1] and stop is None:
            refused = found
    if not events:
        events = (quoted_exception_events(attempts[-1], rules) or cause_phrase_events(attempts[-1], rules)
                  or silent_death_event(lines, attempts[-1], rules) or refused)
    elif not any(real_exceptions(event, rules) for event in events):
        events = [*events, *reasons_after_wrappers(events, kept, rules)]
    wrappers_seen = sum(1 for event in events if not real_exceptions(event, rules))
    chosen = choose_event(events, rules)
    classification = classify(chosen, rules) if chosen is not None else None
    if (classification is None or not classification.rule.regexes or classification.rule.loose
            or classification.rule.outranked_by_other_evidence):
        secondary = secondary_classification(events, kept, rules, exclude=weak_classes(classification),
                                             just_before=lines_before_a_symptom(chosen, classification, kept))
        if secondary is not None:
            classification = secondary
            chosen = event_quoting(secondary.exception, events, kept) or chosen
    if chosen is None or classification is None:
        report = report_without_real_cause(events, benign_suppressed, wrappers_seen)
        report.benign_dropped = dict(benign_ids)
        # Only wrappers: the cause was printed where this log does not reach, so its words are no
        # evidence of it (on the corpus the guess was wrong for each such log it was made for).
        return report if events else with_likely_class(report, not_benign, rules)
    duplicates = duplicates_of(chosen, events, rules) if real_exceptions(chosen, rules) else []
    report = TriageReport(
        found=True,
        root_cause=render_root_cause(classification, workers=1 + len(duplicates)),
        cause_class=classification.rule.cause_class,
        evidence=evidence_lines(chosen, duplicates, events, kept, classification.rule, rules),
        benign_suppressed=benign_suppressed,
        workers_collapsed=len(duplicates),
        remediation=classification.rule.remediation,
        traceback=[line.raw for line in chosen.lines] if chosen.kind == "traceback" else [],
        wrappers_seen=wrappers_seen,
        benign_dropped=dict(benign_ids),
    )
    return with_likely_class(report, not_benign, rules) if not classification.rule.regexes else report


def with_likely_class(report: TriageReport, lines: list[LogLine], rules: Rules) -> TriageReport:
    """No rule named the cause (nothing found, or only the catch-all class): add the class whose
    corpus logs share most of this log's words, unless the log shows nothing failed."""
    if rules.word_model is None or (not report.found and shows_no_failure(lines, rules)):
        return report
    likely = likely_class(rules.word_model, words_of(line.text for line in lines), report.cause_class)
    if likely is not None:
        report.likely_class = likely
        report.likely_remediation = general_remediation(likely, rules.causes)
    return report


def likely_class(model: WordModel, words: set[str], rules_class: Optional[str]) -> Optional[str]:
    """The model's class for a log the rules named nothing in (None) or only the catch-all; None
    when it adds nothing (the same class, or not far enough above the catch-all)."""
    scores = model.log_scores(words)
    likely = top_class(scores)
    if rules_class == FALLBACK_CLASS and scores[likely] - scores.get(FALLBACK_CLASS, -math.inf) < CATCH_ALL_MARGIN:
        return None
    return likely if likely != rules_class else None


def shows_no_failure(lines: list[LogLine], rules: Rules) -> bool:
    """A start that completed, or a stop that was asked for."""
    signs = [*rules.startup_complete, *rules.stop_requested]
    return any(first_matching(signs, line.text) for line in lines)


def general_remediation(cause_class: str, causes: list[CauseRule]) -> str:
    """The remedy of the class's first rule that is not narrow."""
    return next((rule.remediation for rule in causes
                 if rule.cause_class == cause_class and not rule.narrow and rule.remediation), "")


def event_quoting(text: str, events: list[FailureEvent], kept: list[LogLine]) -> FailureEvent | None:
    """The event whose exception is `text`, or the warning line that says it."""
    event = next((event for event in events if text in event.exceptions), None)
    if event is not None:
        return event
    line = next((line for line in kept if line.text.strip() == text), None)
    if line is None:
        return None
    return FailureEvent(kind="line", lines=[line], exceptions=[text], exception_lines=[line])


def quoted_exception_events(lines: list[LogLine], rules: Rules) -> list[FailureEvent]:
    """Last resort when nothing failed visibly: an exception quoted inside another program's
    informational line (Triton's "Failed to initialize Python stub: OSError: ..."). vLLM's own
    INFO records are not read this way (the streaming reader does not keep them)."""
    events = []
    for line in lines:
        if first_matching(rules.stop_requested, line.text):
            break  # what a requested stop logs is not a failure
        if line.level in QUIET_LEVELS and line.source is not None:
            continue
        match = EMBEDDED_EXCEPTION.search(line.text)
        if match and not is_wrapper(match["exception"], rules):
            events.append(FailureEvent(kind="line", lines=[line], exceptions=[match["exception"]],
                                       exception_lines=[line]))
    return events


def cause_phrase_events(lines: list[LogLine], rules: Rules) -> list[FailureEvent]:
    """Last resort for a pasted message without an exception class ("[Errno 99] Cannot assign
    requested address", "FlexAttention does not support sliding window yet."): a line that
    names a known cause. Only raw lines and logged errors, never info or warning records, nor a
    traceback's frame (its function's name, "in ncclCommInitRank", is no failure)."""
    events = []
    for line in lines:
        if first_matching(rules.stop_requested, line.text):
            break
        if (line.level not in (None, *LOGGED_FAILURE_LEVELS) or is_wrapper(line.text, rules)
                or CONFIGURATION_DUMP.search(line.text) or is_frame_line(line)):
            continue
        text = line.text.strip()
        if text and specific_rule([text], rules) is not None:
            events.append(FailureEvent(kind="line", lines=[line], exceptions=[text], exception_lines=[line]))
    # A line that says something failed comes before one that only mentions a cause's word
    # (a configuration dump's "tokenizer=...").
    return [event for event in events if SAYS_SOMETHING_FAILED.search(event.final_exception)] or events


def reasons_after_wrappers(events: list[FailureEvent], lines: list[LogLine], rules: Rules) -> list[FailureEvent]:
    """Only wrappers: a line just after one that says what failed for a known cause (CANN prints
    its reason under torch_npu's 'ERR00100 PTA call acl api failed'). Lines before a wrapper, or
    far from it, are other messages."""
    position = {line.index: number for number, line in enumerate(lines)}
    after: list[LogLine] = []
    for event in events:
        start = position.get(event.lines[-1].index)
        if start is not None:
            after += [line for line in lines[start + 1:start + 1 + WRAPPER_REASON_LINES] if line.stream == event.stream]
    return [event for event in cause_phrase_events(after, rules) if SAYS_SOMETHING_FAILED.search(event.final_exception)]


def silent_death_event(lines: list[LogLine], attempt: list[LogLine], rules: Rules) -> list[FailureEvent]:
    """A log that stops in the middle of start-up (loading weights, compiling, capturing CUDA
    graphs) without any error: the process was killed from outside."""
    last = next((line for line in reversed(lines) if line.text.strip()), None)
    if last is None or first_matching(rules.startup_progress, last.text) is None:
        return []
    if any(first_matching(rules.startup_complete, line.text) for line in attempt):
        return []
    text = f"the log ends during start-up without an error, after: {one_line(last.text)}"
    return [FailureEvent(kind="line", lines=[last], exceptions=[text], exception_lines=[last])]


def report_without_real_cause(
    events: list[FailureEvent], benign_suppressed: int, wrappers_seen: int
) -> TriageReport:
    if not events:
        return TriageReport(
            found=False,
            root_cause="no failure found in the log",
            cause_class=None,
            evidence=[],
            benign_suppressed=benign_suppressed,
            workers_collapsed=0,
            remediation="",
        )
    # Only wrappers: the cause was printed somewhere this log does not reach.
    first = events[0]
    return TriageReport(
        found=True,
        root_cause=shorten(
            f"only a generic wrapper was logged ({one_line(first.final_exception)}); "
            "the real cause is not in this log",
            ROOT_CAUSE_MAX_CHARS,
        ),
        cause_class=FALLBACK_CLASS,
        evidence=[line.raw for event in events[:EVIDENCE_MAX_LINES] for line in event.exception_lines[:1]],
        benign_suppressed=benign_suppressed,
        workers_collapsed=0,
        remediation="Read the full journal from the start of this invocation "
        "(journalctl -u UNIT --since ... or without -n), the cause is printed before the wrapper.",
        traceback=[line.raw for line in first.lines] if first.kind == "traceback" else [],
        wrappers_seen=wrappers_seen,
    )


def evidence_lines(
    chosen: FailureEvent,
    duplicates: list[FailureEvent],
    events: list[FailureEvent],
    kept: list[LogLine],
    rule: CauseRule,
    rules: Rules,
) -> list[str]:
    """The chosen failure's header, raising frame and exception, other workers' copies,
    other lines naming the same cause, and the wrappers that pointed back at it."""
    evidence: list[str] = []
    if chosen.header is not None:
        evidence.append(chosen.header.raw)
    raising_frame = last_frame_line(chosen)
    if raising_frame is not None:
        evidence.append(raising_frame.raw)
    evidence.extend(line.raw for line in chosen.exception_lines)
    for duplicate in duplicates[:OTHER_WORKER_EVIDENCE_LINES]:
        evidence.append(duplicate.exception_lines[-1].raw if duplicate.kind == "line"
                        else duplicate.exception_lines[0].raw)
    evidence.extend(line.raw for line in supporting_lines(chosen, duplicates, kept, rule))
    wrapper_signatures: set[str] = set()
    for event in events:
        if event.first_index <= chosen.first_index or real_exceptions(event, rules):
            continue
        signature = worker_signature(event.final_exception)
        if signature not in wrapper_signatures:
            wrapper_signatures.add(signature)
            evidence.append(event.exception_lines[-1].raw if event.kind == "line"
                            else event.exception_lines[0].raw)
    return unique(evidence)[:EVIDENCE_MAX_LINES]


def supporting_lines(
    chosen: FailureEvent, duplicates: list[FailureEvent], kept: list[LogLine], rule: CauseRule
) -> list[LogLine]:
    """Other lines that match the cause rule, e.g. "NCCL WARN ..." or a logged config error."""
    if not rule.regexes:
        return []
    already_quoted = {line.index for event in (chosen, *duplicates) for line in event.lines}
    matching = [
        line for line in kept
        if line.index not in already_quoted
        and not line.text[:1].isspace()
        and line.level not in ("DEBUG", "INFO")
        and any(regex.search(line.text) for regex in rule.regexes)
    ]
    return matching[:SUPPORTING_EVIDENCE_LINES]


def last_frame_line(event: FailureEvent) -> LogLine | None:
    if event.kind != "traceback":
        return None
    first_exception = event.exception_lines[0].index if event.exception_lines else None
    frames = [line for line in event.lines
              if is_frame_line(line) and (first_exception is None or line.index < first_exception)]
    return frames[-1] if frames else None


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# ----------------------------------------------------------------------------- streaming input

# Lines kept for the analysis: the end of a log, where the latest start attempt is. Lines of
# INFO and DEBUG level that no rule needs are counted and dropped as they stream past.
WINDOW_LINES = 20_000
FORMAT_SAMPLE_LINES = 50
STREAM_BATCH_LINES = 4096
BINARY_SNIFF_BYTES = 8192


class UnusableInput(Exception):
    """The input is not a log that can be read: missing, a directory, empty or binary."""


def triage_path(path: str, rules: Rules) -> TriageReport:
    """Triage a log file in one streaming pass; `-` reads standard input."""
    if path == "-":
        return triage_stream(sys.stdin.buffer, rules)
    file_path = Path(path)
    if file_path.is_dir():
        raise UnusableInput(f"{path} is a directory, not a log file")
    try:
        with file_path.open("rb") as stream:
            return triage_stream(stream, rules)
    except FileNotFoundError:
        raise UnusableInput(f"{path}: no such file") from None
    except PermissionError:
        raise UnusableInput(f"{path}: not readable (permission denied)") from None


def triage_stream(stream: Any, rules: Rules) -> TriageReport:
    """Triage a binary stream of log lines with memory bounded by WINDOW_LINES."""
    lines, benign_before = streamed_lines(stream, rules)
    return triage(lines, rules, benign_before)


def streamed_lines(stream: Any, rules: Rules) -> tuple[list[LogLine], Counter[str]]:
    """The lines the triage reads (windowed_entries), parsed; the benign ones counted."""
    raw_lines = decoded_lines(stream)
    sample = list(islice(raw_lines, FORMAT_SAMPLE_LINES))
    if not any(line.strip() for line in sample):
        raise UnusableInput("the log is empty")
    entries = entries_for_format(detect_format(sample), chain(sample, raw_lines))
    window, benign_before = windowed_entries(entries, rules)
    return [parse_vllm_line(index, *entry) for index, entry in window], benign_before


def words_read(path: str | Path, rules: Rules) -> set[str]:
    """The words of a log file as the word model reads them in triage (for training it)."""
    with Path(path).open("rb") as stream:
        lines = streamed_lines(stream, rules)[0]
    return words_of(line.text for line in drop_benign(lines, rules)[0])


def decoded_lines(stream: Any) -> Iterator[str]:
    first = stream.readline()
    if b"\x00" in first[:BINARY_SNIFF_BYTES]:
        raise UnusableInput("the input is binary, not a text log")
    # Non-UTF-8 bytes (latin-1 pastes, cut multi-byte characters) become U+FFFD; lines end at
    # "\n" only (a progress bar's "\r" stays inside its line).
    rest = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="\n")
    return chain([first.decode("utf-8", errors="replace")] if first else [], rest)


def entries_for_format(log_format: str, raw_lines: Iterator[str]) -> Iterator[Entry]:
    if log_format == "journal-json":
        return parse_journal_json(raw_lines)
    if log_format == "journal-text":
        return parse_journal_text(raw_lines)
    return zip(raw_lines, repeat(None), repeat(None), repeat(None))


# "(APIServer pid=1) INFO 11-30 ...", "vllm-1  | INFO 11-30 ...", "INFO:     10.0.0.1 - ...", quoted "> INFO ..."
QUIET_TEXT = (QUOTE_MARK + r"*(?:\[?\d{4}-\d\d-\d\d[T ][\d:.,]+Z?\]? )?(?:[\w.\-]+ +\| )?(?:\([^)]*\) )*"
              r"(?:INFO|DEBUG)[ :]")
QUIET_TEXT_RECORD = re.compile(QUIET_TEXT)
# A cheap first look at a structured record: docker's json-file record of a quiet text line, or the
# first level field (under one of the parser's level keys) of another record.
QUIET_DOCKER_RECORD = re.compile(r' *\{"log": ?"' + QUIET_TEXT)
LEVEL_FIELD = re.compile(r'"(?:' + "|".join(JSON_RECORD_LEVEL_KEYS)
                         + r')" ?: ?(?:"(?P<name>\w+)"|(?P<number>[0-9]{1,2})(?![0-9.eE]))')
# A field's value that opens, past the process tags the parser takes off, with glog's or Ray's own
# prefix of a warning or an error (GLOG_PREFIX, RAY_LOG_PREFIX), or that is itself a JSON record.
OTHER_LEVEL_IN_VALUE = re.compile(
    r'" ?: ?" *(?:\[rank\d+\]: ?|\([^)"]*\) ?)*(?:\[?[WEF](?:\d{3,4} \d\d:\d\d| [\w.\-]+:\d+\])'
    r'|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [WEF] |\{)'
)
RECORD_ENDS = ("}", "}\n", "}\r\n")  # a record cut short is no JSON to the parser


def may_not_be_quiet(record: str) -> bool:
    """Whether a record with a quiet level field may still not be quiet: its message's own level
    prefix (upper case, as vLLM and Python's logging write it, tagged "[error]", or glog's and
    Ray's), a message that is itself a record, or a traceback field (JSON_RECORD_TRACEBACK_KEYS
    all start "exc or "stack). Plain substring tests where they do: a regex or a loop over a word
    list costs a third more on a 1 GB JSON log."""
    return ("ERROR" in record or "WARN" in record or "CRITICAL" in record or "FATAL" in record
            or "[error]" in record or "[warning]" in record or '"exc' in record or '"stack' in record
            or OTHER_LEVEL_IN_VALUE.search(record) is not None)


def is_quiet_level_field(field: re.Match[str]) -> bool:
    name, number = field["name"], field["number"]
    level = JSON_RECORD_LEVELS.get(name.lower()) if name else JSON_RECORD_LEVEL_NUMBERS.get(int(number))
    return level in QUIET_LEVELS


def is_quiet_record(message: str) -> bool:
    """An INFO or DEBUG record, which no rule needs in the window. A structured (JSON) record is
    quiet when the parser reads it as INFO or DEBUG; most are told by a cheap look alone: a record
    whose first level field is not quiet is taken as not quiet, one with a second level field or a
    hint of another level is parsed."""
    if message[:1] != "{":  # a record opens with its brace, a text line cannot
        if QUIET_TEXT_RECORD.match(message):
            return True
        if message.lstrip(" ")[:1] != "{":
            return False
    if '"log"' in message[:12]:  # docker's: the line's own prefix is its level, as the parser reads it
        if not QUIET_DOCKER_RECORD.match(message):
            return False
        plain = True
    else:
        field = LEVEL_FIELD.search(message)
        if field is None or not is_quiet_level_field(field):
            return False
        # a second level field, or one inside a nested object, is for the parser to weigh
        plain = message.count("{", 0, field.start()) == 1 and LEVEL_FIELD.search(message, field.end()) is None
    if plain and message.endswith(RECORD_ENDS) and not may_not_be_quiet(message):
        return True
    return parse_vllm_line(0, message, None, None, None).level in QUIET_LEVELS


def windowed_entries(entries: Iterator[Entry], rules: Rules) -> tuple[Any, Counter[str]]:
    """The last WINDOW_LINES entries that are neither benign nor quiet records (INFO/DEBUG
    that no rule needs), unparsed; the benign ones counted per rule; the last line kept
    whatever it is (a log that stops mid-start-up ends with one)."""
    window: Any = deque(maxlen=WINDOW_LINES)
    benign: Counter[str] = Counter()
    keep_anyway = [*rules.attempt_start, *rules.stop_requested, *rules.startup_complete, *rules.info_lines_that_fail]
    last: tuple[int, Entry] | None = None
    last_benign: str | None = None
    index = 0
    while True:
        batch = list(islice(entries, STREAM_BATCH_LINES))
        if not batch:
            break
        # Rules whose literal does not occur anywhere in the batch cannot match a line of it.
        text = "\n".join(entry[0] for entry in batch).lower()
        benign_here = [pattern for pattern in rules.benign if pattern.hint is None or pattern.hint in text]
        keep_here = [pattern for pattern in keep_anyway if pattern.hint is None or pattern.hint in text]
        fatal_here = [pattern for pattern in rules.warnings_that_fail if pattern.hint is None or pattern.hint in text]
        for entry in batch:
            position = index
            index += 1
            message = entry[0]
            if not message or message.isspace():
                continue
            lowered = message.lower()
            pattern = first_matching(benign_here, message, lowered) if benign_here else None
            if pattern is not None and fatal_here and first_matching(fatal_here, message, lowered) is not None:
                pattern = None  # a warning a fatal rule names stays, as in drop_benign
            if pattern is not None:
                benign[pattern.id] += 1
                last, last_benign = (position, entry), pattern.id
                continue
            if is_quiet_record(message) and (not keep_here or first_matching(keep_here, message, lowered) is None):
                last, last_benign = (position, entry), None
                continue
            window.append((position, entry))
            last = None
    if last is not None:
        window.append(last)
        if last_benign is not None:  # counted again when the window is read
            benign[last_benign] -= 1
    return window, +benign
