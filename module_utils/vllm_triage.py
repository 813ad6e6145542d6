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

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

CAUSE_CLASSES = (
    "gpu_memory_held_or_oom",
    "nccl",
    "port_in_use",
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
SUPPORTING_EVIDENCE_LINES = 3

# (APIServer pid=123) / (EngineCore_DP0 pid=123) / (Worker_TP1 pid=456) / (VllmWorker rank=0 pid=7)
VLLM_PROCESS_PREFIX = re.compile(r"^\((?P<process>[\w.\-]+)(?: rank=\d+)? pid=(?P<pid>\d+)\) ?")
# Container runtimes and CI systems put their own timestamp in front of each line.
COLLECTOR_TIMESTAMP = re.compile(r"^\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\]? ")
# ERROR 11-30 14:52:01 [core.py:700] message   (vLLM repeats this on every line of a record)
VLLM_LEVEL_PREFIX = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<timestamp>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[(?P<source>[^\]]+)\] ?"
)
# Nov 30 14:52:01 host python[1234]: message   (journalctl's default "short" output)
# 2026-11-30T14:52:01+0000 host python[1234]: message   (-o short-iso)
JOURNAL_TEXT_PREFIX = re.compile(
    r"^(?P<timestamp>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)"
    r" (?P<host>\S+) (?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: ?(?P<message>.*)$"
)
JOURNAL_MARKER = re.compile(r"^-- .* --$|^-- No entries --$")

TRACEBACK_START = "Traceback (most recent call last):"
CHAINED_EXCEPTION_MARKERS = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# An exception logged on its own line, without a traceback: "ValueError: ...".
BARE_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)(?::\s.*)?$")
LOGGED_FAILURE_LEVELS = ("ERROR", "CRITICAL")
# Lines that only point elsewhere, never worth quoting as the exception message.
EXCEPTION_DETAIL_NOISE = re.compile(r"^\s*For further information visit ")
# pydantic appends the whole input to a validation error; it only buries the message.
PYDANTIC_INPUT_TAIL = re.compile(r"\s*\[type=[^\]]*?, input_value=.*$")
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


@dataclass
class CauseRule:
    cause_class: str
    regexes: list[re.Pattern[str]]
    root_cause: str
    remediation: str


@dataclass
class Rules:
    benign: list[Pattern]
    wrappers: list[Pattern]
    fatal_lines: list[Pattern]
    stop_requested: list[Pattern]
    attempt_start: list[Pattern]
    causes: list[CauseRule]


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
        }


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
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return isinstance(entry, dict) and "MESSAGE" in entry


Entry = tuple[str, int | None, str | None, str | None]  # message, pid, timestamp, invocation id


def parse_journal_json(raw_lines: list[str]) -> Iterator[Entry]:
    for line in raw_lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
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
    rest = COLLECTOR_TIMESTAMP.sub("", raw, count=1)
    process_match = VLLM_PROCESS_PREFIX.match(rest)
    if process_match:
        line.process = process_match["process"]
        line.pid = int(process_match["pid"])
        rest = rest[process_match.end():]
    level_match = VLLM_LEVEL_PREFIX.match(rest)
    if level_match:
        line.level = level_match["level"]
        line.timestamp = level_match["timestamp"]
        line.source = level_match["source"]
        rest = rest[level_match.end():]
    line.text = rest.rstrip("\r")
    return line


# ----------------------------------------------------------------------------- rules


def load_rules(path: str | Path) -> Rules:
    """Read and validate the rules data file (JSON)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return rules_from_data(data)


def rules_from_data(data: dict[str, Any]) -> Rules:
    causes = [cause_rule(entry) for entry in data.get("causes", [])]
    classes = [rule.cause_class for rule in causes]
    unknown = sorted(set(classes) - set(CAUSE_CLASSES))
    if unknown:
        raise ValueError(f"unknown cause classes in rules: {', '.join(unknown)}")
    if not any(rule.cause_class == FALLBACK_CLASS and not rule.regexes for rule in causes):
        raise ValueError(f"rules need an '{FALLBACK_CLASS}' cause without patterns as the fallback")
    return Rules(
        benign=[named_pattern(entry) for entry in data.get("benign", [])],
        wrappers=[named_pattern(entry) for entry in data.get("wrappers", [])],
        fatal_lines=[named_pattern(entry) for entry in data.get("fatal_lines", [])],
        stop_requested=[named_pattern(entry) for entry in data.get("stop_requested", [])],
        attempt_start=[named_pattern(entry) for entry in data.get("attempt_start", [])],
        causes=causes,
    )


def named_pattern(entry: dict[str, Any]) -> Pattern:
    return Pattern(id=entry["id"], regex=compile_pattern(entry["pattern"]), why=entry.get("why", ""))


def cause_rule(entry: dict[str, Any]) -> CauseRule:
    patterns = entry.get("patterns", [])
    if "pattern" in entry:
        patterns = [entry["pattern"], *patterns]
    return CauseRule(
        cause_class=entry["class"],
        regexes=[compile_pattern(pattern) for pattern in patterns],
        root_cause=entry.get("root_cause", "{exception}"),
        remediation=entry.get("remediation", ""),
    )


def compile_pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def first_matching(patterns: Iterable[Pattern], text: str) -> Pattern | None:
    return next((pattern for pattern in patterns if pattern.regex.search(text)), None)


# ----------------------------------------------------------------------------- noise


def drop_benign(lines: list[LogLine], rules: Rules) -> tuple[list[LogLine], int]:
    """Remove lines matched by benign rules; also the indented source line that Python's
    warnings module prints under a warning ("  warnings.warn(")."""
    kept: list[LogLine] = []
    suppressed = 0
    last_benign_stream: tuple[str, int | None] | None = None
    for line in lines:
        continues_benign = (
            last_benign_stream == line.stream and line.text[:1].isspace() and line.text.strip() != ""
        )
        if continues_benign or first_matching(rules.benign, line.text):
            suppressed += 1
            last_benign_stream = line.stream
            continue
        last_benign_stream = None
        kept.append(line)
    return kept, suppressed


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
    for line in lines:
        if line.index not in in_traceback and is_fatal_line(line, rules):
            events.append(FailureEvent(kind="line", lines=[line], exceptions=[line.text.strip()],
                                       exception_lines=[line]))
    return sorted(events, key=lambda event: event.first_index)


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


def events_before_requested_stop(
    events: list[FailureEvent], lines: list[LogLine], rules: Rules
) -> list[FailureEvent]:
    """A stop on request (SIGTERM) makes vLLM log EngineDeadError and friends: not a failure."""
    stop = next((line.index for line in lines if first_matching(rules.stop_requested, line.text)), None)
    if stop is None:
        return events
    return [event for event in events if event.first_index < stop]


def split_streams(lines: list[LogLine]) -> dict[tuple[str, int | None], list[LogLine]]:
    streams: dict[tuple[str, int | None], list[LogLine]] = {}
    for line in lines:
        streams.setdefault(line.stream, []).append(line)
    return streams


def is_fatal_line(line: LogLine, rules: Rules) -> bool:
    text = line.text.strip()
    if not text:
        return False
    if line.level in LOGGED_FAILURE_LEVELS:
        return True
    if line.text[:1].isspace():
        return False
    return bool(BARE_EXCEPTION_LINE.match(text)) or first_matching(rules.fatal_lines, text) is not None


def tracebacks_in_stream(lines: list[LogLine]) -> Iterator[FailureEvent]:
    """Walk one stream's lines and cut out Python tracebacks, chained ones as one event."""
    position = 0
    while position < len(lines):
        if lines[position].text.strip() != TRACEBACK_START:
            position += 1
            continue
        header = header_before(lines, position)
        event, position = read_traceback(lines, position, header)
        yield event


def header_before(lines: list[LogLine], position: int) -> LogLine | None:
    """vLLM's logger.exception("EngineCore failed to start.") prints its message first."""
    if position == 0:
        return None
    previous = lines[position - 1]
    text = previous.text
    if not text.strip() or text[:1].isspace() or text.strip() == TRACEBACK_START:
        return None
    if BARE_EXCEPTION_LINE.match(text.strip()):
        return None  # the end of an earlier traceback
    return previous


def read_traceback(lines: list[LogLine], start: int, header: LogLine | None) -> tuple[FailureEvent, int]:
    block: list[LogLine] = []
    exceptions: list[str] = []
    exception_lines: list[LogLine] = []
    expecting_exception = False
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
        elif text[:1].isspace():
            if not expecting_exception and exceptions:
                if not EXCEPTION_DETAIL_NOISE.match(text):
                    exceptions[-1] = f"{exceptions[-1]} {stripped}"
                    exception_lines.append(line)
        elif expecting_exception:
            exceptions.append(stripped)
            exception_lines.append(line)
            expecting_exception = False
        else:
            break  # first ordinary line after the exception: the traceback is over
        block.append(line)
        position += 1
    if not exceptions:
        exceptions = ["(traceback without a final exception line)"]
        exception_lines = block[-1:]
    event = FailureEvent(kind="traceback", lines=block, exceptions=exceptions,
                         exception_lines=exception_lines, header=header)
    return event, position


def chained_marker_just_seen(block: list[LogLine]) -> bool:
    for line in reversed(block):
        stripped = line.text.strip()
        if not stripped:
            continue
        return stripped in CHAINED_EXCEPTION_MARKERS
    return False


def is_wrapper(text: str, rules: Rules) -> bool:
    return first_matching(rules.wrappers, text) is not None


def real_exceptions(event: FailureEvent, rules: Rules) -> list[str]:
    """The event's exception texts that are not generic wrappers, oldest first."""
    return [text for text in event.exceptions if not is_wrapper(text, rules)]


def worker_signature(text: str) -> str:
    for pattern, replacement in WORKER_VARYING_PARTS:
        text = pattern.sub(replacement, text)
    return " ".join(text.split())


def choose_event(events: list[FailureEvent], rules: Rules) -> FailureEvent | None:
    """The first real traceback; a single fatal line only when no traceback is real."""
    real = [event for event in events if real_exceptions(event, rules)]
    tracebacks = [event for event in real if event.kind == "traceback"]
    if tracebacks:
        return tracebacks[0]
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
    candidates = list(reversed(real_exceptions(event, rules)))  # newest first
    if event.header is not None:
        candidates.append(event.header.text.strip())
    for rule in rules.causes:
        for text in candidates:
            if any(regex.search(one_line(text)) for regex in rule.regexes):
                return Classification(rule=rule, exception=text)
    fallback = fallback_rule(rules)
    return Classification(rule=fallback, exception=candidates[0])


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


def triage(lines: list[LogLine], rules: Rules) -> TriageReport:
    """Name the root cause of the failure shown in `lines` (from parse_log)."""
    kept, benign_suppressed = drop_benign(lines, rules)
    attempts = split_attempts(kept, rules)
    # Under Restart= a journal holds several start attempts: the latest failed one counts.
    events: list[FailureEvent] = []
    for attempt in reversed(attempts):
        events = events_before_requested_stop(find_failure_events(attempt, rules), attempt, rules)
        if events:
            kept = attempt
            break
    wrappers_seen = sum(1 for event in events if not real_exceptions(event, rules))
    chosen = choose_event(events, rules)
    if chosen is None:
        return report_without_real_cause(events, benign_suppressed, wrappers_seen)
    duplicates = duplicates_of(chosen, events, rules)
    classification = classify(chosen, rules)
    return TriageReport(
        found=True,
        root_cause=render_root_cause(classification, workers=1 + len(duplicates)),
        cause_class=classification.rule.cause_class,
        evidence=evidence_lines(chosen, duplicates, events, kept, classification.rule, rules),
        benign_suppressed=benign_suppressed,
        workers_collapsed=len(duplicates),
        remediation=classification.rule.remediation,
        traceback=[line.raw for line in chosen.lines] if chosen.kind == "traceback" else [],
        wrappers_seen=wrappers_seen,
    )


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
              if line.text.lstrip().startswith("File ") and (first_exception is None or line.index < first_exception)]
    return frames[-1] if frames else None


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
