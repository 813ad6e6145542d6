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


@dataclass
class ShardHeader:
    name: str
    architecture: str | None
    split_no: int | None
    split_count: int | None
    split_tensors: int | None
    tensor_names: list[str]


def read_shard_header(path: Path) -> ShardHeader:
    """The keys and tensor names of one GGUF shard (the reader maps the file; no tensor data is read)."""
    from gguf import GGUFReader

    reader = GGUFReader(path, "r")

    def value(key: str):
        field_ = reader.get_field(key)
        return None if field_ is None else field_.contents()

    return ShardHeader(path.name, value("general.architecture"), value("split.no"), value("split.count"),
                       value("split.tensors.count"), [tensor.name for tensor in reader.tensors])


def split_set_problems(headers: list[ShardHeader], expected_architecture: str | None = None,
                       expected_tensor_count: int | None = None) -> list[str]:
    """Everything that makes headers (a set's shards, first shard first) not one consistent model.

    A split set from llama.cpp names shard i as -0000i-of-0000n, stores split.no = i - 1 and the same
    split.count / split.tensors.count in every shard, and its shards hold each tensor exactly once.
    """
    problems: list[str] = []
    count = len(headers)
    for index, header in enumerate(headers):
        match = SPLIT_NAME.match(header.name)
        if count > 1 and not match:
            problems.append(f"{header.name}: not named -NNNNN-of-NNNNN.gguf although the set has {count} files")
        if match and (int(match["no"]) != index + 1 or int(match["count"]) != count):
            problems.append(f"{header.name}: is shard {int(match['no'])} of {int(match['count'])} by name, "
                            f"but position {index + 1} of {count} in the set")
        if count > 1 or header.split_count is not None:
            if header.split_no != index or header.split_count != count:
                problems.append(f"{header.name}: split.no={header.split_no} split.count={header.split_count} in its header, "
                                f"expected split.no={index} split.count={count}")
    declared = {h.split_tensors for h in headers if h.split_tensors is not None}
    if len(declared) > 1:
        problems.append("shards disagree on split.tensors.count: "
                        + ", ".join(f"{h.name}={h.split_tensors}" for h in headers))
    seen: dict[str, str] = {}
    for header in headers:
        for tensor in header.tensor_names:
            if tensor in seen:
                problems.append(f"{header.name}: tensor {tensor} is also in {seen[tensor]} (shards from different sets?)")
                break
            seen[tensor] = header.name
    total = sum(len(h.tensor_names) for h in headers)
    if len(declared) == 1 and total != next(iter(declared)):
        problems.append(f"the shards hold {total} tensors, split.tensors.count says {next(iter(declared))}")
    if expected_tensor_count is not None and total != expected_tensor_count:
        problems.append(f"the set holds {total} tensors, the model profile expects {expected_tensor_count}")
    architecture = headers[0].architecture if headers else None
    if architecture is None and headers:
        problems.append(f"{headers[0].name}: no general.architecture in the first shard")
    elif expected_architecture and architecture != expected_architecture:
        problems.append(f"{headers[0].name}: architecture {architecture}, the model profile expects {expected_architecture}")
    return problems
