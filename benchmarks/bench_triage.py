#!/usr/bin/env python3
"""Benchmark the triage on a big generated log: seconds and peak RSS of one CLI run.

    python3 benchmarks/bench_triage.py [--size-mb 1024] [--format text|docker-json|json-logger]
                                       [--baseline GIT_REF] [--keep]

Writes a log of the given size to a temporary directory (vLLM request/metrics lines,
warnings, progress bars, a port-in-use failure at the end), runs tools/triage.py on it in a
child process and prints the wall time, the child's peak RSS and the class it named. --format
writes each line as docker's json-file record ({"log": line}), or each logged record as a JSON
logger's ({"level": ..., "msg": ...}; warnings and progress bars stay text), instead of plain text.
With --baseline, the triage of that commit (its CLI, module_utils and rules) runs on the same
log right after, and the ratio of the two times is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLI = REPO_ROOT / "tools" / "triage.py"
CHUNK_LINES = 10_000

# Shapes of lines a long-running vLLM writes; numbers vary per line.
FILLER = (
    '(APIServer pid=4711) INFO 11-30 14:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: '
    '{n}.3 tokens/s, Avg generation throughput: 812.4 tokens/s, Running: 12 reqs, Waiting: 0 reqs, '
    'GPU KV cache usage: 31.2%, Prefix cache hit rate: 12.0%',
    '(APIServer pid=4711) INFO:     10.0.0.{k}:5{n:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    '(EngineCore_DP0 pid=4790) WARNING 11-30 14:{m:02d}:{s:02d} [scheduler.py:77] Sequence group {n} is preempted '
    'by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.',
    '/usr/lib/python3.12/site-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.',
    'Loading safetensors checkpoint shards:  {k}% Completed | {k}/100 [00:{s:02d}<00:40,  2.06it/s]',
)
FAILURE = (
    "(APIServer pid=4711) Traceback (most recent call last):\n"
    '(APIServer pid=4711)   File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/api_server.py", '
    "line 1916, in run_server\n"
    "(APIServer pid=4711)     sock.bind((host, port))\n"
    "(APIServer pid=4711) OSError: [Errno 98] Address already in use\n"
)


LEVEL_WORDS = ("ERROR", "WARNING", "INFO")


def as_record(line: str, log_format: str) -> str:
    if log_format == "docker-json":
        return json.dumps({"log": line + "\n", "stream": "stderr", "time": "2026-11-30T14:00:00.000000001Z"})
    level = next((word for word in LEVEL_WORDS if f" {word} " in line or f" {word}:" in line), None)
    if log_format == "json-logger" and level:  # what Python's warnings and tqdm write stays text
        return json.dumps({"level": level.lower(), "msg": line, "logger": "vllm"})
    return line


def write_log(path: Path, size_bytes: int, log_format: str = "text") -> int:
    lines = 0
    with path.open("w", encoding="utf-8") as out:
        while out.tell() < size_bytes:
            chunk = [
                as_record(FILLER[i % len(FILLER)].format(m=(i // 60) % 60, s=i % 60, n=i % 10_000, k=i % 100),
                          log_format)
                for i in range(lines, lines + CHUNK_LINES)
            ]
            out.write("\n".join(chunk) + "\n")
            lines += CHUNK_LINES
        out.write("".join(as_record(line, log_format) + "\n" for line in FAILURE.splitlines()))
    return lines + 4


def timed_triage(cli: Path, log: Path) -> tuple[float, float, int, dict]:
    """Seconds, peak RSS (MiB), exit status and JSON report of one triage run in a child process."""
    start = time.monotonic()
    child = subprocess.Popen([sys.executable, str(cli), str(log), "--json"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    output = child.stdout.read() if child.stdout else ""
    _pid, status, usage = os.wait4(child.pid, 0)  # this child's own rusage, not the maximum of all
    seconds = time.monotonic() - start
    exit_code = os.waitstatus_to_exitcode(status)
    report = json.loads(output) if exit_code in (0, 1) else {}
    return seconds, usage.ru_maxrss / 1024, exit_code, report


def baseline_cli(ref: str, into: Path) -> Path:
    """The triage CLI of a commit, unpacked with its module_utils and rules."""
    archive = subprocess.run(["git", "-C", str(REPO_ROOT), "archive", ref, "tools/triage.py", "plugins/module_utils",
                              "files/triage"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "tools" / "triage.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--format", choices=("text", "docker-json", "json-logger"), default="text",
                        help="how each line is written (default: text)")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument("--baseline", metavar="GIT_REF", help="also time the triage of this commit on the same log")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-triage-") as tmp:
        log = Path(tmp) / "big.log"
        lines = write_log(log, args.size_mb * 1024 * 1024, args.format)
        seconds, peak_mb, exit_code, report = timed_triage(CLI, log)
        print(f"log: {log.stat().st_size / 1024 / 1024:.0f} MiB, {lines} lines")
        print(f"seconds: {seconds:.1f}")
        print(f"peak RSS: {peak_mb:.0f} MiB")
        print(f"exit: {exit_code}, class: {report.get('class')}, root cause: {report.get('root_cause')}")
        if args.baseline:
            (Path(tmp) / "baseline").mkdir()
            base_seconds, base_peak_mb, base_exit, base_report = timed_triage(
                baseline_cli(args.baseline, Path(tmp) / "baseline"), log)
            print(f"baseline {args.baseline}: {base_seconds:.1f} s, peak RSS {base_peak_mb:.0f} MiB, exit {base_exit}, "
                  f"class {base_report.get('class')}")
            print(f"time ratio (this tree / baseline): {seconds / base_seconds:.2f}")
        if args.keep:
            kept = Path.cwd() / "big-triage.log"
            log.replace(kept)
            print(f"kept: {kept}")
    return 0 if exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
