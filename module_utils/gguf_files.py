"""Check a model directory before it is placed: GGUF files, split sets, HF config and tokenizer.

vLLM serves a GGUF with ``--tokenizer DIR``, reading config.json and the tokenizer from DIR, so
a GGUF without them beside it cannot serve; this check names what is missing before any change.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

GGUF_MAGIC = b"GGUF"
SPLIT_NAME = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
CONFIG_FILE = "config.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
OPTIONAL_HF_FILES = (
    "generation_config.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)


@dataclass
class GgufFile:
    name: str
    size: int
    architecture: str | None


@dataclass
class ModelDirReport:
    source_dir: str
    gguf_files: list[GgufFile] = field(default_factory=list)
    hf_files: list[str] = field(default_factory=list)
    architecture: str | None = None
    model_type: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def read_gguf_architecture(path: Path) -> str | None:
    """general.architecture from a GGUF header, None when the file does not carry it."""
    from gguf import GGUFReader  # imported late: only the controller needs gguf

    field_ = GGUFReader(path, "r").get_field("general.architecture")
    return None if field_ is None else field_.contents()


def has_gguf_magic(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(4) == GGUF_MAGIC


def missing_split_parts(names: list[str]) -> list[str]:
    """Shards a -NNNNN-of-NNNNN.gguf set names but the list does not hold."""
    sets: dict[tuple[str, int], set[int]] = {}
    for name in names:
        match = SPLIT_NAME.match(name)
        if match:
            sets.setdefault((match["stem"], int(match["count"])), set()).add(int(match["no"]))
    return [
        f"{stem}-{no:05d}-of-{count:05d}.gguf"
        for (stem, count), present in sorted(sets.items())
        for no in range(1, count + 1)
        if no not in present
    ]


def inspect_gguf(path: Path, problems: list[str]) -> GgufFile | None:
    if not path.is_file():
        problems.append(f"GGUF file not found: {path}")
        return None
    if not has_gguf_magic(path):
        problems.append(f"not a GGUF file (bad magic): {path}")
        return None
    return GgufFile(path.name, path.stat().st_size, read_gguf_architecture(path))


def read_model_type(config_path: Path, problems: list[str]) -> str | None:
    try:
        config = json.loads(config_path.read_text())
    except (OSError, ValueError) as error:
        problems.append(f"{CONFIG_FILE} is not readable JSON: {config_path}: {error}")
        return None
    model_type = config.get("model_type")
    if not model_type:
        problems.append(f"{CONFIG_FILE} has no model_type: {config_path}")
    return model_type


def inspect_model_dir(source_dir: str, gguf_names: list[str]) -> ModelDirReport:
    """Everything wrong with source_dir as a servable GGUF model, as a report."""
    root = Path(source_dir)
    report = ModelDirReport(source_dir=str(root))
    if not root.is_dir():
        report.problems.append(f"model source directory not found: {root}")
        return report
    if not gguf_names:
        report.problems.append("no GGUF files listed for the model")
    report.problems += [f"split set incomplete, missing {name}" for name in missing_split_parts(gguf_names)]
    for name in gguf_names:
        info = inspect_gguf(root / name, report.problems)
        if info:
            report.gguf_files.append(info)
    architectures = {f.architecture for f in report.gguf_files if f.architecture}
    if len(architectures) > 1:
        report.problems.append(f"GGUF files disagree on architecture: {sorted(architectures)}")
    report.architecture = next(iter(sorted(architectures)), None)

    config = root / CONFIG_FILE
    if config.is_file():
        report.model_type = read_model_type(config, report.problems)
    else:
        report.problems.append(f"{CONFIG_FILE} not found beside the GGUF (vLLM reads it from there): {config}")
    if not any((root / name).is_file() for name in TOKENIZER_FILES):
        report.problems.append(f"no tokenizer beside the GGUF: expected one of {', '.join(TOKENIZER_FILES)} in {root}")
    report.hf_files = [
        name for name in (CONFIG_FILE, *TOKENIZER_FILES, *OPTIONAL_HF_FILES) if (root / name).is_file()
    ]
    return report
