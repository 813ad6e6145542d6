#!/usr/bin/env python3
"""Run a systemd unit's ExecStart in the foreground, with its EnvironmentFile.

For machines without systemd as PID 1 (the GPU test machines): what runs there is exactly
what the vllm_service role rendered. The environment file is read with systemd's rules
(KEY=VALUE lines, '#'/';' comments, single or double quotes), ExecStart's continuation
lines are joined, "$NAME" words are split into several arguments and "${NAME}" is kept as
one, as systemd does. The unit's Environment= lines are read too (%t, systemd's runtime
directory, becomes /run); the EnvironmentFile values win over them, as in systemd.
The venv's python can be replaced with --python, and --set KEY=VALUE adds to or overrides the
environment (e.g. PYTHONPATH of a kit).

Where ExecStart starts with the role's launcher (vllm-fleet-serve PYTHON -m vllm...), --python
replaces the word after it, and --launcher FILE runs the launcher from FILE (the checkout's
plugins/module_utils/serve_launcher.py, which the role installs as vllm-fleet-serve) with this
interpreter: the launcher then resolves --host and execs vLLM, as on a host. The launcher
execs its command without a PATH search, so --python should be an absolute path there.

usage: run_unit.py UNIT [--env-file FILE] [--python python3] [--launcher FILE] [--set K=V ...] [--dry-run]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

VARIABLE = re.compile(r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")


class UnitError(Exception):
    """The unit or its environment file cannot be run as systemd would."""


def unit_directives(text: str, section: str = "Service") -> dict[str, str]:
    """Directives of one section, continuation lines joined (last assignment wins)."""
    directives: dict[str, str] = {}
    current = None
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith(("#", ";"))):
            continue
        if not pending and line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if current == section and "=" in line:
            key, _, value = line.partition("=")
            directives[key.strip()] = value.strip()
    if pending:
        raise UnitError(f"the last line of [{section}] ends with a continuation backslash")
    return directives


def unit_env_files(text: str) -> list[str]:
    """Every EnvironmentFile= of [Service], in order (systemd reads them all; later ones win)."""
    files, current = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif current == "Service" and line.startswith("EnvironmentFile="):
            files.append(line.partition("=")[2].strip())
    return files


def unit_environment(text: str) -> dict[str, str]:
    """The Environment= assignments of [Service] (KEY=VALUE words, quotes as systemd takes them)."""
    env: dict[str, str] = {}
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif current == "Service" and line.startswith("Environment="):
            for word in shlex.split(line.partition("=")[2]):
                key, sep, value = word.partition("=")
                if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                    raise UnitError(f"Environment= word is not KEY=VALUE: {word!r}")
                env[key] = value.replace("%t", "/run").replace("%%", "%")
    return env


LAUNCHER = "vllm-fleet-serve"


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines as systemd reads an EnvironmentFile."""
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UnitError(f"environment file line {number} is not KEY=VALUE: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            inner = value[1:-1]
            value = inner if value[0] == "'" else re.sub(r'\\(["\\$`])', r"\1", inner)
        env[key] = value
    return env


def expand_command(command: str, env: dict[str, str]) -> list[str]:
    """ExecStart's words with $NAME (split into words) and ${NAME} (one word) replaced."""
    argv: list[str] = []
    for word in shlex.split(command):
        whole = VARIABLE.fullmatch(word)
        if whole and whole["plain"]:
            argv.extend(env.get(whole["plain"], "").split())
            continue
        argv.append(VARIABLE.sub(lambda m: env.get(m["braced"] or m["plain"], ""), word))
    return argv


def command_and_env(unit_text: str, env_text: str, python: str | None,
                    overrides: dict[str, str], launcher: str | None = None) -> tuple[list[str], dict[str, str]]:
    service = unit_directives(unit_text)
    if "ExecStart" not in service:
        raise UnitError("the unit has no ExecStart in [Service]")
    env = unit_environment(unit_text)
    env.update(parse_env_file(env_text))
    env.update(overrides)
    argv = expand_command(service["ExecStart"].lstrip("-@:+!"), env)
    if os.path.basename(argv[0]) == LAUNCHER:
        if python and len(argv) > 1:
            argv[1] = python
        if launcher:
            argv[:1] = [sys.executable, launcher]
    elif launcher:
        raise UnitError(f"--launcher given, but ExecStart does not start with {LAUNCHER}: {argv[0]}")
    elif python:
        argv[0] = python
    return argv, env


def parse_overrides(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UnitError(f"--set wants KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("unit", type=Path)
    ap.add_argument("--env-file", type=Path, action="append", default=[],
                    help="repeatable, read in order (default: the unit's EnvironmentFile lines)")
    ap.add_argument("--python", help="replace ExecStart's first word (the venv's python)")
    ap.add_argument("--launcher", help=f"run ExecStart's {LAUNCHER} from this file (plugins/module_utils/serve_launcher.py)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--dry-run", action="store_true", help="print the command and environment as JSON")
    args = ap.parse_args(argv)
    try:
        unit_text = args.unit.read_text()
        env_paths = args.env_file or [Path(path.lstrip("-")) for path in unit_env_files(unit_text)]
        env_text = "\n".join(path.read_text() for path in env_paths)
        command, env = command_and_env(unit_text, env_text, args.python, parse_overrides(args.set),
                                       args.launcher)
    except (UnitError, OSError) as err:
        print(f"run_unit: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(json.dumps({"argv": command, "env": env}, indent=1))
        return 0
    print("run_unit:", shlex.join(command), flush=True)
    os.execvpe(command[0], command, {**os.environ, **env})
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
