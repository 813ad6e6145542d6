"""vllm-fleet: the operator's commands, each one playbook run through ansible-runner.

  vllm-fleet [-i INVENTORY] [--limit HOSTS] [--serial N] [-e KEY=VALUE]... [--json FILE] COMMAND

deploy (site.yml), preflight (go / no-go, changes nothing), restart (rolling restart), verify, triage, status, rollback. A live table shows
each host's current task; at the end a summary (host, release, state, tok/s) and, with --json, a
result file. Exit codes: 0 all hosts fine, 3 a host failed, 4 a host unreachable, 5 a host's new
release failed and was rolled back, 1 anything else (2: bad usage).

  vllm-fleet plan ...   runs no playbook: the offline capacity planner (vllm_fleet/plan.py; exit 0 go,
                        6 no-go).
  vllm-fleet report     runs no playbook: the verify history as a PNG (vllm_fleet/report.py).
  vllm-fleet dashboard  runs no playbook: the Grafana dashboard's panels drawn from Prometheus (vllm_fleet/dashboard.py).
  vllm-fleet variables  runs no playbook: every role's variables (docs/variables.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ansible_runner
from rich.console import Console
from rich.live import Live
from rich.table import Table

from vllm_fleet.summary import EXIT_ERROR, RunSummary, group_hosts


def collection_root() -> Path:
    """Where the collection vllm_fleet.fleet is: installed beside this package by pip, or the
    checkout that tools/bootstrap.sh linked into the controller venv."""
    package = importlib.import_module("ansible_collections.vllm_fleet.fleet")
    return Path(next(iter(package.__path__))).resolve()


REPO = collection_root()
PLAYBOOKS = {
    "deploy": "site.yml",
    "preflight": "playbooks/preflight.yml",
    "restart": "playbooks/rolling_restart.yml",
    "verify": "playbooks/verify.yml",
    "triage": "playbooks/triage.yml",
    "status": "playbooks/status.yml",
    "rollback": "playbooks/rollback.yml",
}
HOST_GROUP = "vllm_hosts"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vllm-fleet", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("command", choices=sorted(PLAYBOOKS))
    parser.add_argument("-i", "--inventory", default=str(REPO / "inventory" / "local"), help="inventory path")
    parser.add_argument("-l", "--limit", help="hosts or groups to run on")
    parser.add_argument("--serial", help="hosts per batch for restart and rollback (a number or N%%)")
    parser.add_argument("--apply", action="store_true",
                        help="restart: also roll out the inventory's configuration (new release per host)")
    parser.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE",
                        help="extra variable (VALUE is read as JSON when it parses)")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--artifacts", type=Path, help="ansible-runner's directory (default: a new temp dir)")
    args = parser.parse_args(argv)
    if not Path(args.inventory).exists():
        parser.error(f"inventory {args.inventory} does not exist")
    if args.json and not replaceable_result(args.json):
        parser.error(f"--json {args.json}: refusing to overwrite a file that is not a vllm-fleet result")
    return args


def replaceable_result(path: Path) -> bool:
    """--json may write a new file or replace an earlier result, never another file (a log)."""
    if not path.exists():
        return True
    try:
        return isinstance(json.loads(path.read_text()), dict)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False


def extra_vars(pairs: list[str], serial: str | None, apply: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"vllm-fleet: -e wants KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    if serial:
        out["fleet_roll_serial"] = serial
    if apply:
        out["fleet_roll_apply"] = True
    return out


def ansible_envvars() -> dict[str, str]:
    return {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def inventory_hosts(inventory: str, limit: str | None) -> list[str]:
    """The vLLM hosts the run may touch (so that a host a stopped roll never reached is listed).

    An inventory ansible-inventory cannot list alone (a vaulted file) gives an empty list: the
    hosts then come from the run's events.
    """
    out, _error = ansible_runner.get_inventory(action="list", inventories=[inventory], response_format="json",
                                               envvars=ansible_envvars(), quiet=True)
    try:
        hosts = group_hosts(out if isinstance(out, dict) else json.loads(out), HOST_GROUP)
    except (TypeError, ValueError):
        return []
    if limit:
        wanted = {part.strip() for part in limit.replace(":", ",").split(",")}
        hosts = [host for host in hosts if host in wanted] or hosts
    return hosts


def table(summary: RunSummary, final: bool) -> Table:
    view = Table(title="vllm-fleet" if not final else "summary")
    live = any(outcome.live for outcome in summary.hosts.values())
    columns = ["host", "state", "release", "tok/s", "changed"] + (["now (Prometheus)"] if live else []) \
        + (["cause"] if final else ["task"])
    for column in columns:
        view.add_column(column, overflow="fold")
    for outcome in summary.hosts.values():
        last = outcome.message[:300] if final else outcome.task
        now = [outcome.live or "-"] if live else []
        view.add_row(outcome.host, outcome.state, outcome.release or "-",
                     f"{outcome.tok_s:.1f}" if outcome.tok_s else "-", str(outcome.changed), *now, last)
    return view


def last_tok_s(results_dir: Path, host: str) -> float | None:
    """Single-stream decode of the host's last verify run, from the history on the controller."""
    history = results_dir / f"{host}.jsonl"
    if not history.is_file():
        return None
    lines = [line for line in history.read_text().splitlines() if line.strip()]
    try:
        return json.loads(lines[-1])["result"]["decode"]["tok_s_tpot"] if lines else None
    except (KeyError, ValueError):
        return None


def results_dir() -> Path:
    default = Path(os.environ.get("HOME", "/root")) / ".local" / "state" / "vllm-fleet" / "verify"
    return Path(os.environ.get("VLLM_FLEET_RESULTS_DIR", default))


def run(args: argparse.Namespace, console: Console) -> tuple[int, dict[str, Any]]:
    summary = RunSummary.for_hosts(inventory_hosts(args.inventory, args.limit))
    workdir = args.artifacts or Path(tempfile.mkdtemp(prefix="vllm-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    with Live(table(summary, final=False), console=console, refresh_per_second=4, transient=True) as live:
        def on_event(event: dict[str, Any]) -> bool:
            summary.feed(event)
            live.update(table(summary, final=False))
            return True

        result = ansible_runner.run(
            private_data_dir=str(workdir), project_dir=str(REPO), playbook=str(REPO / PLAYBOOKS[args.command]),
            inventory=str(Path(args.inventory).resolve()), limit=args.limit,
            extravars=extra_vars(args.extra_var, args.serial, args.apply),
            envvars=ansible_envvars(),
            event_handler=on_event, quiet=True,
        )
    for outcome in summary.hosts.values():
        if outcome.tok_s is None and args.command == "status":
            outcome.tok_s = last_tok_s(results_dir(), outcome.host)
    code = summary.exit_code(result.rc) if result.status != "error" or summary.hosts else EXIT_ERROR
    report = {"command": args.command, "playbook": PLAYBOOKS[args.command], "inventory": args.inventory,
              "runner_rc": result.rc, "runner_status": result.status, "exit_code": code,
              "started": round(started, 3), "duration_s": round(time.time() - started, 1),
              "artifacts": str(workdir), "hosts": summary.as_dict()}
    console.print(table(summary, final=True))
    return code, report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plan"]:  # offline, its own options: no inventory, no playbook
        from vllm_fleet import plan

        return plan.main(argv[1:])
    if argv[:1] == ["report"]:  # offline: the verify history as a PNG
        from vllm_fleet import report

        return report.main(argv[1:])
    if argv[:1] == ["dashboard"]:  # no playbook: the Grafana dashboard drawn from Prometheus
        from vllm_fleet import dashboard

        return dashboard.main(argv[1:], REPO / "files" / "monitoring" / "grafana-dashboard.json")
    if argv[:1] == ["variables"]:  # offline: the roles' variables from their argument specs
        from vllm_fleet import variables

        return variables.main(argv[1:], REPO / "roles")
    args = parse_args(argv)
    console = Console(stderr=False)
    code, report = run(args, console)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    console.print(f"{args.command}: exit {code} ({report['duration_s']} s); artifacts in {report['artifacts']}")
    return code


if __name__ == "__main__":
    sys.exit(main())
