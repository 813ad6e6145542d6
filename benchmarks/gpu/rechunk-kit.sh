#!/usr/bin/env bash
# Re-cuts a device kit (../shared/device-kit/make-kit.sh output) into folders that fit one device
# call beside the checkout: the call's tree limit is 64 MiB for the checkout and everything
# carried, and the checkout itself is ~10 MB now. The first folder is kept small so that other
# carried files (models, tools) fit beside it.
# usage: rechunk-kit.sh KIT_DIR OUT_DIR [FIRST_BYTES] [BYTES]
set -euo pipefail
kit=${1:?usage: rechunk-kit.sh KIT_DIR OUT_DIR [FIRST_BYTES] [BYTES]}; out=${2:?}; first=${3:-28000000}; size=${4:-55000000}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
wheel=$(cut -d' ' -f3 "$kit"/k*/vllm.sha256)
cat "$kit"/k*/vllmpart.* > "$work/$wheel"
(cd "$work" && sha256sum -c --quiet "$kit"/k*/vllm.sha256)
split -b 18500000 -d -a 3 "$work/$wheel" "$work/vllmpart."; rm "$work/$wheel"
rm -rf "$out"; i=1; tot=0; limit=$first; mkdir -p "$out/k1"
for f in "$work"/vllmpart.* $(ls -S "$kit"/k*/*.whl); do
  s=$(stat -c %s "$f")
  if [ $((tot + s)) -gt "$limit" ]; then i=$((i + 1)); tot=0; limit=$size; mkdir -p "$out/k$i"; fi
  cp "$f" "$out/k$i/"; tot=$((tot + s))
done
cp "$kit"/k*/vllm.sha256 "$kit"/k*/install.sh "$out/k$i/"
du -sb "$out"/k* ; echo "carry $out/k1 … k$i in consecutive device calls"
