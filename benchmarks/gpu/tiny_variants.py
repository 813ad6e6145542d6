#!/usr/bin/env python3
"""Variants of ../shared/glm5-reference's tiny GLM-5 for the GPU acceptance run.

  tiny_variants.py REF_DIR OUT_DIR

Writes, keeping the reference's metadata (every key but split.*):
  tiny-glm5-Q8_0-noidx.gguf  the converter's Q8_0 with the DSA indexer tensors left out (a GGUF
                             as llama.cpp wrote them before it supported the indexer: dense MLA);
                             where REF_DIR has no tiny-glm5-Q8_0.gguf (a model written by
                             tests/fixtures/models/make_glm5_tiny.py), the F32 shards quantized with gguf-py;
  tiny-glm5-Q6_K-noidx.gguf  a K-quant from the F32 shards: Q6_K where rows hold a multiple of
                             256 values, Q8_0 for other matrices, F32 where the converter keeps
                             F32; indexer left out. gguf-py has no K-quant quantizer, so Q6_K
                             blocks are packed here (llama.cpp's block_q6_k layout) and checked
                             by dequantizing them again with gguf-py.
  tiny-glm5-Q8_0-idx.gguf    only for a model with DSA indexer tensors (make_glm5_tiny.py
                             --with-indexer): gguf-py's Q8_0 with the indexer kept (sparse DSA)
"""
from __future__ import annotations

import os
import sys

import numpy as np
import gguf

Q = gguf.GGMLQuantizationType
QK_K = 256


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """float32 [..., n*256] -> block_q6_k bytes [..., n*210]: ql[128] qh[64] scales[16] d(f16)."""
    rows = x.reshape(-1, QK_K).astype(np.float32)
    sub = rows.reshape(-1, 16, 16)
    amax_idx = np.abs(sub).argmax(axis=2)
    sub_max = np.take_along_axis(sub, amax_idx[..., None], axis=2)[..., 0]  # signed max-magnitude value
    sub_scale = sub_max / -32.0
    max_scale_idx = np.abs(sub_scale).argmax(axis=1)
    max_scale = np.take_along_axis(sub_scale, max_scale_idx[:, None], axis=1)[:, 0]
    iscale = np.where(max_scale != 0, -128.0 / np.where(max_scale != 0, max_scale, 1), 0)
    d = (1.0 / np.where(iscale != 0, iscale, np.inf)).astype(np.float16)
    scales = np.clip(np.round(iscale[:, None] * sub_scale), -128, 127).astype(np.int8)
    eff = d.astype(np.float32)[:, None] * scales.astype(np.float32)  # per sub-block step
    q = np.where(eff[..., None] != 0, np.round(sub / np.where(eff[..., None] != 0, eff[..., None], 1)), 0)
    L = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, QK_K)
    ql = np.zeros((L.shape[0], 128), np.uint8)
    qh = np.zeros((L.shape[0], 64), np.uint8)
    for half in range(2):
        j = half * 128
        a, b, c, e = (L[:, j + o: j + o + 32] for o in (0, 32, 64, 96))
        ql[:, half * 64: half * 64 + 32] = (a & 0xF) | ((c & 0xF) << 4)
        ql[:, half * 64 + 32: half * 64 + 64] = (b & 0xF) | ((e & 0xF) << 4)
        qh[:, half * 32: half * 32 + 32] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
    blocks = np.concatenate([ql, qh, scales.view(np.uint8), d.reshape(-1, 1).view(np.uint8)], axis=1)
    return blocks.reshape(*x.shape[:-1], x.shape[-1] // QK_K * 210)


def keep_f32(name: str, shape: tuple[int, ...]) -> bool:
    return len(shape) == 1 or name.endswith(("ffn_gate_inp.weight", "indexer.proj.weight"))


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter) -> None:
    for key, field in reader.fields.items():
        if key.startswith(("GGUF.", "split.")) or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)


def numpy_shape(t) -> tuple[int, ...]:
    return tuple(int(n) for n in reversed(t.shape))


def write_variant(meta_reader, tensors, out_path: str, convert, keep_indexer: bool = False) -> None:
    w = gguf.GGUFWriter(out_path, meta_reader.fields["general.architecture"].contents())
    copy_metadata(meta_reader, w)
    for t in tensors:
        if ".indexer." in t.name and not keep_indexer:
            continue
        arr, raw = convert(t)
        w.add_tensor(t.name, arr, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    ref, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    shards = [gguf.GGUFReader(os.path.join(ref, f"tiny-glm5-F32-0000{i}-of-00003.gguf")) for i in (1, 2, 3)]
    f32 = [t for r in shards for t in r.tensors]
    converter_q8 = os.path.join(ref, "tiny-glm5-Q8_0.gguf")
    if os.path.exists(converter_q8):
        q8 = gguf.GGUFReader(converter_q8)
        write_variant(q8, q8.tensors, os.path.join(out, "tiny-glm5-Q8_0-noidx.gguf"),
                      lambda t: (np.asarray(t.data), None if t.tensor_type == Q.F32 else t.tensor_type))
    else:  # no converter output (tests/fixtures/models/make_glm5_tiny.py --mla-dims): gguf-py's Q8_0, the converter's own routine
        def to_q8(t):
            x = np.asarray(t.data, dtype=np.float32).reshape(numpy_shape(t))
            return (x, None) if keep_f32(t.name, x.shape) else (gguf.quants.quantize(x, Q.Q8_0), Q.Q8_0)
        write_variant(shards[0], f32, os.path.join(out, "tiny-glm5-Q8_0-noidx.gguf"), to_q8)

    def to_k(t):
        x = np.asarray(t.data, dtype=np.float32).reshape(numpy_shape(t))
        if keep_f32(t.name, x.shape):
            return x, None
        if x.shape[-1] % QK_K == 0:
            q = quantize_q6_k(x)
            back = gguf.quants.dequantize(q, Q.Q6_K)
            err = float(np.abs(back - x).max() / np.abs(x).max())
            assert err < 0.05, f"{t.name}: Q6_K round trip error {err}"
            return q, Q.Q6_K
        return gguf.quants.quantize(x, Q.Q8_0), Q.Q8_0

    write_variant(shards[0], f32, os.path.join(out, "tiny-glm5-Q6_K-noidx.gguf"), to_k)
    names = ["tiny-glm5-Q8_0-noidx.gguf", "tiny-glm5-Q6_K-noidx.gguf"]
    if any(".indexer." in t.name for t in f32):  # a model written with --with-indexer: keep it too
        def f32_or_q8(t):
            x = np.asarray(t.data, dtype=np.float32).reshape(numpy_shape(t))
            return (x, None) if keep_f32(t.name, x.shape) else (gguf.quants.quantize(x, Q.Q8_0), Q.Q8_0)
        write_variant(shards[0], f32, os.path.join(out, "tiny-glm5-Q8_0-idx.gguf"), f32_or_q8, keep_indexer=True)
        names.append("tiny-glm5-Q8_0-idx.gguf")
    for name in names:
        r = gguf.GGUFReader(os.path.join(out, name))
        kinds = sorted({t.tensor_type.name for t in r.tensors})
        print(name, len(r.tensors), "tensors", kinds, os.path.getsize(os.path.join(out, name)), "bytes")


if __name__ == "__main__":
    main()
