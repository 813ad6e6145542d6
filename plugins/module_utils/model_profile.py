"""Static checks of a model profile's source description, run on the controller before any change."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from .gguf_files import missing_split_parts
from .model_download import shown_url

SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")
SOURCES = ("controller", "url", "hf", "local")
NEEDS = {"controller": "source_dir", "url": "urls", "hf": "hf.repo", "local": "local_dir"}


def url_file_name(entry: dict) -> str:
    """The file a urls entry names: its own name, else the last component of the URL's path
    (a presigned URL's query string is not part of the file's name)."""
    if entry.get("name"):
        return str(entry["name"])
    return PurePosixPath(unquote(urlsplit(str(entry.get("url") or "")).path)).name


def plain_name_problem(label: str, name: str) -> str | None:
    """A file name must be one path component: the model store joins it under a version directory."""
    if not name or name in (".", "..") or any(char in name for char in "/\\\0"):
        return f"{label} {name!r} is not a plain file name (one path component: no '/', not '.' or '..')"
    return None


def url_problems(urls: list[dict], gguf_files: list[str]) -> list[str]:
    problems = []
    names = []
    for index, entry in enumerate(urls):
        url = entry.get("url") or ""
        name = url_file_name(entry)
        names.append(name)
        if not url:
            problems.append(f"urls[{index}] has no url")
        elif (problem := plain_name_problem(f"urls[{index}] name", name)):
            problems.append(problem)
        if not SHA256.match(str(entry.get("sha256") or "")):
            problems.append(f"urls[{index}] ({name or shown_url(url)}): sha256 missing or not 64 hex digits; "
                            "every downloaded file is verified against it")
    problems += [f"gguf file {name} has no entry in urls" for name in gguf_files if name not in names]
    return problems


def profile_problems(source: str, gguf_files: list[str], given: dict[str, object], urls: list[dict]) -> list[str]:
    """Everything wrong with how the profile describes its source; given maps NEEDS' keys to values."""
    if source not in SOURCES:
        return [f"source {source!r} is not one of {', '.join(SOURCES)}"]
    problems = []
    if not given.get(NEEDS[source]):
        problems.append(f"source {source} needs {NEEDS[source]} in the model profile")
    if not gguf_files:
        problems.append("gguf_files lists no GGUF file")
    problems += [problem for name in gguf_files if (problem := plain_name_problem("gguf_files entry", name))]
    problems += [f"gguf_files is not a complete split set: {name} is missing" for name in missing_split_parts(gguf_files)]
    if source == "url":
        problems += url_problems(urls, gguf_files)
    return problems
