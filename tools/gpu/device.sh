#!/usr/bin/env bash
# Device side of the GPU acceptance run (issue 9), run from the checkout's root on the device
# machine. Phases, one per device call (the machine stays warm ~30 s between calls):
#   stash          copy .gpu (tools, units, series, tiny reference) and .kit/c/k1 out of the checkout
#   kit N          add .kit/c/kN to ~/kit
#   start          install the kit (unpatched ~/site, patched ~/site-p via module_utils/patch_series.py),
#                  start the tiny GLM-5 units, write the GLM-5-shaped GGUF, start its units,
#                  then the tiny acceptance: unpatched fails, patched agree with transformers
#   bench          wait for the GLM-5-shaped units, benchmark each in turn (tools/vllm_bench.py), stop all
#   startx2 / benchx2   the same for the TP=2 units on nvidia-h200-x2
# Every unit runs through tools/gpu/run_unit.py: the rendered ExecStart and EnvironmentFile.
set -uo pipefail
phase=${1:?phase}; shift
G=$HOME/gpu; L=$HOME/logs; mkdir -p "$L"; OUT=${OUT:-/tmp/out}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

start_unit() {  # name site
  local n=$1 site=$2
  setsid python3 "$G/tools/run_unit.py" "$G/units/$n/vllm.service" --env-file "$G/units/$n/vllm.env" \
    --python python3 --set PYTHONPATH="$site" > "$L/$n.log" 2>&1 < /dev/null &
  echo $! > "$L/$n.pid"; stamp "started $n (pid $!)"
}
port_of() { grep -o -- '--port [0-9]*' "$G/units/$1/vllm.service" | cut -d' ' -f2; }
alive() { kill -0 "$(cat "$L/$1.pid")" 2>/dev/null; }
wait_ready() {  # name deadline_epoch -> 0 ready, 1 died, 2 timeout
  local n=$1 until=$2 port; port=$(port_of "$1")
  while [ "$(date +%s)" -lt "$until" ]; do
    curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && { stamp "$n ready"; return 0; }
    alive "$n" || { stamp "$n exited"; return 1; }
    sleep 3
  done
  stamp "$n not ready (timeout)"; return 2
}
stop_all() { for f in "$L"/*.pid; do [ -f "$f" ] && kill -TERM -- "-$(cat "$f")" 2>/dev/null; done; sleep 8
             for f in "$L"/*.pid; do [ -f "$f" ] && kill -KILL -- "-$(cat "$f")" 2>/dev/null; rm -f "$f"; done; }
pack() { tar -C "$HOME" -czf "$OUT/$1.tgz" logs results 2>/dev/null; ls -la "$OUT"; }
mkdir -p "$HOME/results"

case $phase in
stash)
  mkdir -p ~/kit && cp .kit/c/k1/* ~/kit/ && rm -rf "$G" && cp -r .gpu "$G" && stamp "stashed"
  nvidia-smi -L; df -h "$HOME" | tail -1; command -v patch nvcc
  python3 -c "import transformers, torch; from transformers import GlmMoeDsaForCausalLM; print('transformers', transformers.__version__, 'torch', torch.__version__, torch.cuda.device_count())"
  ;;
kit)
  cp ".kit/c/k$1"/* ~/kit/ && stamp "kit part $1 in place: $(ls ~/kit | wc -l) files"
  ;;
start|startx2)
  [ -n "${1:-}" ] && cp .kit/c/k"$1"/* ~/kit/
  [ -d ~/site/vllm ] || (cd ~/kit && bash install.sh "$HOME/site") > "$L/install.log" 2>&1 || { stamp "install failed"; tail -20 "$L/install.log"; exit 1; }
  rm -rf ~/site-p && cp -a ~/site ~/site-p && mkdir -p ~/series && cp -r files/patches/vllm-gguf-plugin "$G/series/vllm" ~/series/
  python3 - <<'PY' 2>&1 | tee "$HOME/results/patch.txt"
import json, os
from pathlib import Path
from module_utils.patch_series import apply_series
for dist in ("vllm", "vllm-gguf-plugin"):
    print(json.dumps(apply_series(Path(os.path.expanduser("~/site-p")), Path(os.path.expanduser("~/series")), dist).as_dict()))
PY
  stamp "patched"
  # transformers 5.17 (the device image) rejects layer_types "indexed_attention" (written by 5.19)
  python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c.pop('layer_types', None); json.dump(c, open(p, 'w'), indent=1)" "$G/ref/hf/config.json"
  if [ "$phase" = start ] && [ "${TINY:-1}" = 1 ]; then
    PYTHONPATH=~/site-p python3 "$G/tools/tiny_variants.py" "$G/ref" "$G/ref" > "$HOME/results/tiny_variants.txt" 2>&1
    start_unit t-unpatched ~/site
    for n in t-sparse t-q8 t-q6k; do start_unit $n ~/site-p; done
  fi
  [ -f /root/big/glm5-shaped-${QT:-Q8_0}.gguf ] || PYTHONPATH=~/site-p python3 "$G/tools/make_glm5_shaped.py" /root/big --qtype "$(echo ${QT:-Q8_0} | tr A-Z a-z)" > "$HOME/results/make_glm5_shaped.txt" 2>&1
  stamp "GLM-5-shaped GGUF: $(cat "$HOME/results/make_glm5_shaped.txt")"
  if [ "$phase" = start ]; then
    for n in b-tuned b-eager b-default; do start_unit $n ~/site-p; done
  fi
  if [ "$phase" = start ] && [ "${TINY:-1}" = 1 ]; then
    deadline=$(( $(date +%s) + ${TINY_WAIT:-330} ))
    wait_ready t-unpatched "$deadline"; stamp "unpatched: $(grep -m3 -E 'Error|error:' "$L/t-unpatched.log" | cut -c1-300)"
    for n in t-q8 t-q6k t-sparse; do
      if wait_ready $n "$deadline"; then
        PYTHONPATH=~/site-p python3 "$G/tools/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
          --model glm-5 --ref "$G/ref" --tokens 100 --out "$HOME/results/gen-$n.json"
      fi
    done
    cd "$G/ref"
    declare -A W=([t-q8]=tiny-glm5-Q8_0-noidx.gguf [t-q6k]=tiny-glm5-Q6_K-noidx.gguf [t-sparse]=tiny-glm5-Q8_0.gguf)
    for n in t-q8 t-q6k t-sparse; do
      [ -f "$HOME/results/gen-$n.json" ] || continue
      PYTHONPATH=~/site-p python3 "$G/tools/glm5_agreement.py" compare "$HOME/results/gen-$n.json" --ref "$G/ref" \
        --weights "${W[$n]}" --label "$n vs transformers on the file's own weights" --out "$HOME/results/cmp-$n-own.json" 2>&1 | tail -2
      PYTHONPATH=~/site-p python3 "$G/tools/glm5_agreement.py" compare "$HOME/results/gen-$n.json" --ref "$G/ref" \
        --weights tiny-glm5-F32-0000{1,2,3}-of-00003.gguf --label "$n vs transformers on the F32 weights" \
        --out "$HOME/results/cmp-$n-f32.json" 2>&1 | tail -2
    done
    cd - >/dev/null
    for n in t-unpatched t-sparse t-q8 t-q6k; do [ -f "$L/$n.pid" ] && kill -TERM -- "-$(cat "$L/$n.pid")" 2>/dev/null; done
  elif [ "$phase" = startx2 ]; then
    for n in ${X2_UNITS:-x-ll x-nccl x-fi}; do start_unit $n ~/site-p; sleep "${X2_STAGGER:-0}"; done
  fi
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv
  pack start
  ;;
bench|benchx2)
  units=${UNITS:-b-tuned b-eager b-default}
  deadline=$(( $(date +%s) + ${BIG_WAIT:-420} ))
  for n in $units; do wait_ready $n "$deadline"; done
  for n in $units; do
    curl -sf "http://127.0.0.1:$(port_of $n)/v1/models" >/dev/null || continue
    stamp "bench $n"
    PYTHONPATH=~/site-p timeout 150 python3 tools/vllm_bench.py --base-url "http://127.0.0.1:$(port_of $n)/v1" --model glm-5 \
      --concurrency ${CONC:-1 8 32} --requests-per-level 32 --max-tokens 128 --decode-requests 3 --decode-max-tokens 256 \
      --gguf /root/big/glm5-shaped-${QT:-Q8_0}.gguf --num-gpus ${NGPU:-1} --gpu-name "NVIDIA H200" \
      --json "$HOME/results/bench-$n.json" 2>&1 | tee "$HOME/results/bench-$n.txt" | tail -12
  done
  for n in $units; do grep -m5 -iE "attention backend|cudagraph|Graph capturing finished|allreduce|Error" "$L/$n.log" | cut -c1-250; done
  stop_all; pack bench
  ;;
esac
stamp "phase $phase done"
