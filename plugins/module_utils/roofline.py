"""Bandwidth-bound ceiling for single-stream decode of a GGUF model.

At batch size one every decode step streams the weights the token touches from memory once: the
dense layers, the output head, one embedding row, and of each MoE layer only the experts the
router picks (expert_used_count of expert_count). Ceiling tok/s = aggregate memory bandwidth /
those bytes. KV-cache reads are left out (small at short contexts), so the real ceiling is a little
lower and a measured fraction a little pessimistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .gguf_files import SPLIT_NAME

# Peak memory bandwidth in GB/s (10^9 bytes/s) from the vendors' datasheets, keyed by the name
# nvidia-smi prints (the longest key contained in the name wins).
GPU_BANDWIDTH_GBS = {
    "RTX PRO 6000 Blackwell": 1792.0,
    "H200": 4800.0,
    "H100 80GB HBM3": 3350.0,
    "H100 NVL": 3900.0,
    "H100 PCIe": 2000.0,
    "H100": 3350.0,
    "GH200": 4000.0,
    "B200": 8000.0,
    "A100-SXM4-80GB": 2039.0,
    "A100-SXM4-40GB": 1555.0,
    "A100 80GB PCIe": 1935.0,
    "A100-PCIE-40GB": 1555.0,
    "L40S": 864.0,
    "RTX 5090": 1792.0,
    "RTX 4090": 1008.0,
}

EXPERT_TENSOR_MARK = "_exps."


@dataclass(frozen=True)
class TensorSize:
    name: str
    n_bytes: int
    rows: int  # outermost dimension (ggml's last ne): vocabulary size for the embedding table
    n_elements: int = 0  # weights in the tensor (0 where the caller did not know: a hand-made list)


@dataclass
class Roofline:
    bytes_per_token: int
    total_bytes: int
    expert_count: int
    expert_used: int
    bandwidth_gbs: float | None
    num_gpus: int
    bandwidth_source: str

    @property
    def ceiling_tok_s(self) -> float | None:
        if not self.bandwidth_gbs or self.bytes_per_token <= 0:
            return None
        return self.bandwidth_gbs * 1e9 * self.num_gpus / self.bytes_per_token

    def fraction(self, measured_tok_s: float) -> float | None:
        ceiling = self.ceiling_tok_s
        return measured_tok_s / ceiling if ceiling else None

    def as_dict(self) -> dict:
        ceiling = self.ceiling_tok_s
        return {
            "bytes_per_token": self.bytes_per_token,
            "total_bytes": self.total_bytes,
            "expert_count": self.expert_count,
            "expert_used": self.expert_used,
            "bandwidth_gbs": self.bandwidth_gbs,
            "bandwidth_source": self.bandwidth_source,
            "num_gpus": self.num_gpus,
            "ceiling_tok_s": round(ceiling, 1) if ceiling else None,
        }


def gpu_bandwidth_gbs(gpu_name: str) -> float | None:
    matches = [key for key in GPU_BANDWIDTH_GBS if key.lower() in gpu_name.lower()]
    return GPU_BANDWIDTH_GBS[max(matches, key=len)] if matches else None


def bytes_touched_per_token(tensors: Iterable[TensorSize], expert_count: int, expert_used: int) -> int:
    total = 0.0
    for tensor in tensors:
        if tensor.name.startswith("token_embd."):
            total += tensor.n_bytes / max(tensor.rows, 1)
        elif EXPERT_TENSOR_MARK in tensor.name and expert_count > 0:
            total += tensor.n_bytes * expert_used / expert_count
        else:
            total += tensor.n_bytes
    return int(total)


def split_siblings(first: Path) -> list[Path]:
    """All files of a split GGUF given any one of them; the file alone when it is not split."""
    match = SPLIT_NAME.match(first.name)
    if not match:
        return [first]
    count = int(match["count"])
    return [first.with_name(f"{match['stem']}-{no:05d}-of-{count:05d}.gguf") for no in range(1, count + 1)]


def read_tensor_sizes(paths: list[Path]) -> tuple[list[TensorSize], int, int]:
    """Tensor sizes of every shard, and expert_count / expert_used_count from the metadata."""
    from gguf import GGUFReader  # imported late: only hosts with the model's venv have it

    sizes: list[TensorSize] = []
    expert_count = expert_used = 0
    for path in paths:
        reader = GGUFReader(str(path))
        for key, field in reader.fields.items():
            if key.endswith(".expert_count"):
                expert_count = int(field.contents())
            elif key.endswith(".expert_used_count"):
                expert_used = int(field.contents())
        sizes.extend(TensorSize(t.name, int(t.n_bytes), int(t.shape[-1]) if len(t.shape) else 1, int(t.n_elements))
                     for t in reader.tensors)
    return sizes, expert_count, expert_used


def roofline_for(gguf_path: str, num_gpus: int, gpu_name: str | None, bandwidth_gbs: float | None) -> Roofline:
    sizes, expert_count, expert_used = read_tensor_sizes(split_siblings(Path(gguf_path)))
    source = "given"
    if bandwidth_gbs is None and gpu_name:
        bandwidth_gbs = gpu_bandwidth_gbs(gpu_name)
        source = f"table: {gpu_name}" if bandwidth_gbs else f"unknown GPU {gpu_name!r}"
    elif bandwidth_gbs is None:
        source = "no GPU and no bandwidth given"
    return Roofline(
        bytes_per_token=bytes_touched_per_token(sizes, expert_count, expert_used),
        total_bytes=sum(size.n_bytes for size in sizes),
        expert_count=expert_count,
        expert_used=expert_used,
        bandwidth_gbs=bandwidth_gbs,
        num_gpus=num_gpus,
        bandwidth_source=source,
    )
