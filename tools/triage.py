#!/usr/bin/env python3
"""Name the root cause of a failed vLLM start from its log.

    python3 tools/triage.py FILE [--json] [--rules PATH]

FILE is a plain vLLM log, `journalctl -u UNIT` text or `journalctl -u UNIT -o json`
output (also pasted fragments, docker/kubectl/Ray output); `-` reads standard input, e.g.
`journalctl -u vllm -o json | python3 tools/triage.py -`. The log is read in one streaming
pass with bounded memory.

Exit status: 0 a cause was found, 1 the log shows no failure, 2 the input or the arguments
cannot be used (missing file, a directory, empty or binary input, bad rules, bad options).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "plugins"))  # stdlib only: the collection's module_utils as a plain package

from module_utils.vllm_triage import TriageReport, UnusableInput, load_rules, triage_path  # noqa: E402

DEFAULT_RULES = REPO_ROOT / "files" / "triage" / "rules.json"
EXIT_CAUSE_FOUND = 0
EXIT_NO_FAILURE = 1
EXIT_USAGE = 2


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="log file, or - for standard input")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rules", type=Path, default=DEFAULT_RULES, help=f"rules file (default {DEFAULT_RULES})")
    return parser.parse_args(argv)  # exits 2 on usage errors


def human_report(report: TriageReport) -> str:
    if not report.found:
        return (
            "No failure found in the log "
            f"({report.benign_suppressed} benign lines ignored{benign_detail(report)}).\n"
            + likely_class_lines(report)
        )
    lines = [
        f"Root cause:  {report.root_cause}",
        f"Class:       {report.cause_class}",
        f"Remediation: {report.remediation}",
        *likely_class_lines(report).splitlines(),
        "Evidence:",
        *(f"  {line}" for line in report.evidence),
        f"Benign lines dropped: {report.benign_suppressed}{benign_detail(report)}",
        f"Duplicate worker tracebacks folded: {report.workers_collapsed}",
        f"Generic wrappers seen through: {report.wrappers_seen}",
    ]
    return "\n".join(lines) + "\n"


def likely_class_lines(report: TriageReport) -> str:
    if not report.likely_class:
        return ""
    return (f"Likely class: {report.likely_class} (no rule named the cause; the log's words resemble "
            f"this class's logs in the public corpus)\n"
            f"If so:       {report.likely_remediation}\n")


def benign_detail(report: TriageReport) -> str:
    if not report.benign_dropped:
        return ""
    parts = ", ".join(f"{rule} {count}" for rule, count in sorted(report.benign_dropped.items()))
    return f": {parts}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        rules = load_rules(args.rules)
    except (OSError, ValueError, KeyError) as error:
        print(f"triage: rules {args.rules}: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        report = triage_path(args.file, rules)
    except (UnusableInput, OSError) as error:
        print(f"triage: cannot use the input: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(human_report(report))
    return EXIT_CAUSE_FOUND if report.found else EXIT_NO_FAILURE


if __name__ == "__main__":
    sys.exit(main())
