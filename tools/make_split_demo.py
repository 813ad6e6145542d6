#!/usr/bin/env python3
"""Split a single-file GGUF into a -NNNNN-of-NNNNN set with gguf's own writer.

Used by the model-download tests and the download benchmark: the demo model (8.4 MB, qwen3,
F32) becomes a servable split set of a few MB per shard, config.json and tokenizer copied beside.
``--shift`` moves the shard boundaries by one tensor: a set with the same names and split.count
whose shards do not fit the unshifted set's (a "shard from another set").
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import gguf

HF_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
            "special_tokens_map.json")


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> None:
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub_type)


def split_gguf(source: Path, out_dir: Path, stem: str, shards: int, shift: int = 0) -> list[Path]:
    """Write source's tensors as `shards` files named stem-0000i-of-0000n.gguf in out_dir."""
    reader = gguf.GGUFReader(source)
    architecture = reader.get_field("general.architecture").contents()
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(out_dir / f"{stem}.gguf", architecture)
    copy_metadata(reader, writer)
    tensors = list(reader.tensors)
    per_shard = -(-len(tensors) // shards)
    for index, tensor in enumerate(tensors):
        shard = min(max(index + shift, 0) // per_shard, shards - 1)
        while len(writer.tensors) <= shard:
            writer.tensors.append({})
        # writer.tensors[-1] receives add_tensor; shards are filled in order.
        writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(out_dir.glob(f"{stem}-*-of-*.gguf"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parents[1] / "files/models/demo-qwen3")
    parser.add_argument("--gguf", default="demo-qwen3-F32.gguf")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--stem", default="demo-qwen3-F32")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--shift", type=int, default=0)
    args = parser.parse_args()
    for path in split_gguf(args.source / args.gguf, args.out, args.stem, args.shards, args.shift):
        print(path, path.stat().st_size)
    for name in HF_FILES:
        if (args.source / name).is_file():
            shutil.copy2(args.source / name, args.out / name)


if __name__ == "__main__":
    main()
