#!/usr/bin/env bash
# Builds the wheel kit that brings the cuda profile's pins (vllm 0.33.0 + vllm-gguf-plugin 0.0.5 +
# gguf 0.19.0) to the H200 device image (Python 3.12, torch 2.11.0+cu130, triton 3.6.0,
# NCCL 2.28.9, cuDNN 9.19; benchmarks/gpu/h200-image-packages.txt lists its packages).
#
# What is carried: every resolved requirement the image lacks, plus the ones whose image version
# cannot serve vllm 0.33.0: torch 2.14.0, triton 3.8.0, torchvision 0.29.0 (the image's is built
# for torch 2.11) and NCCL 2.32.3 (torch 2.14 needs ncclCommResume, which 2.28.9 lacks:
# "libtorch_cuda.so: undefined symbol: ncclCommResume"; 2.30.7, the version torch declares, is not
# offered, 2.32.3 is the next one). Optional groups, each starting in a fresh chunk at the end:
#   cutlass  nvidia-cutlass-dsl 4.8.0 (+ libs base/core/cu13) and quack-kernels 0.6.5: vllm 0.33.0's
#            CUDA sparse-DSA path imports cutlass (deepseek_v32 fused_q), and with cutlass importable
#            vLLM's CuTe DSL kernels import quack. The kit is unpacked, not pip-installed, so the
#            .pth of nvidia-cutlass-dsl does not run: device-033.sh puts
#            SITE/nvidia_cutlass_dsl/dsl_packages on PYTHONPATH itself
#   cudnn    nvidia-cudnn-cu13 9.24.0.43, the version torch 2.14 was built with (the image has 9.19;
#            torch refuses an older minor only where cuDNN is used)
# Dropped: large optional GPU toolchains that serving a GGUF does not import, torchaudio, and
# cuda-python 12.x (pulled by flashinfer; its 'cuda' package would shadow the image's cuda-bindings 13).
#
# Every wheel is cut into parts and the parts are packed in order into folders of at most
# BYTES (first folder FIRST_BYTES, leaving room for what else the first call carries); each folder
# is one device call's carry. Each folder holds kit.json (wheels, parts, sha256, groups) and
# benchmarks/gpu/kit_install.py installs every wheel whose parts have all arrived, so the install
# happens during the transfer.
# usage: make-kit-033.sh DEST [GROUP ...]      GROUP: cutlass, cudnn   (DEST: a git-ignored folder)
#   env: BYTES (55000000), FIRST_BYTES (BYTES), WHEELS (download cache, default DEST.wheels)
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
dest=${1:?usage: make-kit-033.sh DEST [cutlass] [cudnn]}; shift
groups=("$@")
bytes=${BYTES:-55000000}; first=${FIRST_BYTES:-$bytes}
cache=${WHEELS:-$dest.wheels}; mkdir -p "$cache"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
printf '%s\n' vllm==0.33.0 vllm-gguf-plugin==0.0.5 gguf==0.19.0 > "$work/req.in"
# keep the image's transformers and tokenizers (vllm 0.33.0 accepts transformers >=5.16.1,<5.21)
printf '%s\n' transformers==5.17.0 tokenizers==0.23.2 > "$work/cons.txt"
uv=$(command -v uv || true)
if [ -z "$uv" ]; then python3 -m venv "$work/uv" && "$work/uv/bin/pip" install -q uv && uv=$work/uv/bin/uv; fi
"$uv" pip compile "$work/req.in" -c "$work/cons.txt" --python-version 3.12 \
  --python-platform x86_64-manylinux_2_28 -q -o "$work/resolved.txt"
python3 - "$work/resolved.txt" "$here/h200-image-packages.txt" "${groups[@]}" > "$work/wanted.txt" <<'PY'
import re, sys
norm = lambda s: re.sub(r"[-_.]+", "-", s.strip().lower())
have = {norm(l) for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
groups = set(sys.argv[3:])
override = {"torch", "triton", "torchvision", "nvidia-nccl-cu13"}
version = {"nvidia-nccl-cu13": "2.32.3"}
skip = re.compile(r"^(tokenspeed-.*|nvidia-cutlass-dsl.*|nvidia-nvvm|nvidia-cuda-(nvcc|nvdisasm|cccl|crt)|tilelang|"
                  r"pynvvideocodec|z3-solver|torchcodec|humming-kernels|quack-kernels|cuda-tile|fastapi-cloud-cli|"
                  r"sentry-sdk|supervisor|torchaudio|cuda-python|nccl-extensions|nccl4py|nvidia-cudnn-cu13)$")
first = ("torch", "nvidia-nccl-cu13")  # first in the kit: the early import check needs only these
core = []
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
    if m and (norm(m[1]) in override or norm(m[1]) not in have) and not skip.match(norm(m[1])):
        core.append((norm(m[1]), version.get(norm(m[1]), m[2])))
core.sort(key=lambda nv: (first.index(nv[0]) if nv[0] in first else len(first), nv[0]))
for name, ver in core:
    print(f"core {name}=={ver}")
if "cutlass" in groups:
    for name in ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
                 "nvidia-cutlass-dsl-libs-cu13"):
        print(f"cutlass {name}==4.8.0")
    # once 'cutlass' imports, vLLM's CuTe DSL kernels run (the low-latency router GEMM in warm-up,
    # dense too) and import quack (2026-12-02: "No module named 'quack'"); its other needs
    # (apache-tvm-ffi, torch-c-dlpack-ext, einops) are in the core group or the image
    print("cutlass quack-kernels==0.6.5")
if "cudnn" in groups:
    print("cudnn nvidia-cudnn-cu13==9.24.0.43")
PY
plat=(); for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux_2_24 manylinux_2_26 \
  manylinux_2_31 manylinux_2_34 manylinux_2_35 manylinux1 manylinux_2_5 linux; do plat+=(--platform "${p}_x86_64"); done
cut -d' ' -f2 "$work/wanted.txt" > "$work/req.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$cache" -r "$work/req.txt" 2>&1 | grep -v "^WARNING: Location" || true
rm -rf "$dest"; mkdir -p "$dest"
python3 - "$work/wanted.txt" "$cache" "$dest" "$bytes" "$first" <<'PY'
import hashlib, json, os, re, sys
wanted, cache, dest, size, first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
norm = lambda s: re.sub(r"[-_.]+", "-", s.strip().lower())
files = {}
for f in os.listdir(cache):
    if f.endswith(".whl"):
        name, ver = f.split("-")[:2]
        files[(norm(name), ver)] = f
plan = []
for line in open(wanted):
    group, req = line.split()
    name, ver = req.split("==")
    plan.append((group, files[(norm(name), ver)]))
kit = {"wheels": {}, "chunks": []}
chunk, room, group_now = 0, 0, None
def new_chunk():
    global chunk, room
    chunk += 1
    room = first if chunk == 1 else size
    os.makedirs(os.path.join(dest, f"k{chunk}"))
    kit["chunks"].append({"chunk": chunk, "group": group_now, "parts": []})
for group, wheel in plan:
    if group != group_now:
        group_now = group
        new_chunk()
    data = open(os.path.join(cache, wheel), "rb").read()
    entry = {"group": group, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "parts": []}
    offset = 0
    while offset < len(data):
        if room <= 0:
            new_chunk()
        piece = data[offset:offset + room]
        part = f"{wheel}.part{len(entry['parts']):03d}"
        open(os.path.join(dest, f"k{chunk}", part), "wb").write(piece)
        entry["parts"].append(part)
        kit["chunks"][-1]["parts"].append(part)
        offset += len(piece); room -= len(piece)
    kit["wheels"][wheel] = entry
for c in kit["chunks"]:
    json.dump(kit, open(os.path.join(dest, f"k{c['chunk']}", "kit.json"), "w"), indent=1)
json.dump(kit, open(os.path.join(dest, "kit.json"), "w"), indent=1)
for c in kit["chunks"]:
    total = sum(os.path.getsize(os.path.join(dest, f"k{c['chunk']}", p)) for p in c["parts"])
    print(f"k{c['chunk']}\t{c['group']}\t{total/1e6:.1f} MB\t{len(c['parts'])} parts")
print(f"{len(kit['wheels'])} wheels, {sum(w['bytes'] for w in kit['wheels'].values())/1e6:.0f} MB in {chunk} chunks")
PY
