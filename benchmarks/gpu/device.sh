#!/usr/bin/env bash
# Device side of the GPU acceptance run (issue 9), run from the checkout's root on the device
# machine. Phases, one per device call (the machine stays warm ~30 s between calls):
#   stash          copy .gpu (tools, units, series, tiny reference) and .kit/c/k1 out of the checkout
#   kit N          add .kit/c/kN to ~/kit
#   start          install the kit (unpatched ~/site, patched ~/site-p via module_utils/patch_series.py),
#                  GLM-5-sized MoE kernel check (unpatched vs patched plugin), write the tiny GLM-5
#                  (GLM-5's MLA dims) and the GLM-5-shaped GGUFs (QTS="Q8_0 Q4_K"), start every unit,
#                  then the tiny acceptance: patched agrees with transformers
#   bench          wait for the GLM-5-shaped units, benchmark each in turn (tools/vllm_bench.py), stop all
#   startx2 / benchx2   the same for the TP=2 units on nvidia-h200-x2
# Every unit runs through benchmarks/gpu/run_unit.py: the rendered ExecStart and EnvironmentFile.
set -uo pipefail
phase=${1:?phase}; shift
G=$HOME/gpu; L=$HOME/logs; mkdir -p "$L"; OUT=${OUT:-/tmp/out}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

start_unit() {  # name site
  local n=$1 site=$2
  setsid python3 "$G/tools/run_unit.py" "$G/units/$n/vllm.service" --env-file "$G/units/$n/release.env" --env-file "$G/units/$n/vllm.env" \
    --python python3 --set PYTHONPATH="$site" > "$L/$n.log" 2>&1 < /dev/null &
  echo $! > "$L/$n.pid"; stamp "started $n (pid $!)"
}
port_of() { grep -o -- '--port [0-9]*' "$G/units/$1/release.env" | cut -d' ' -f2; }
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
  # the branch's series (vllm + vllm-gguf-plugin) travel in .gpu/series; the code that applies them is the checkout's
  rm -rf ~/site-p ~/series && cp -a ~/site ~/site-p && cp -r "$G/series" ~/series
  python3 - <<'PY' 2>&1 | tee "$HOME/results/patch.txt"
import json, os
from pathlib import Path
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
for dist in ("vllm", "vllm-gguf-plugin"):
    print(json.dumps(apply_series(Path(os.path.expanduser("~/site-p")), Path(os.path.expanduser("~/series")), dist).as_dict()))
PY
  stamp "patched"
  if [ "$phase" = start ]; then
    # GLM-5-sized Q8_0 experts through the fused-MoE kernel, unpatched then patched (own processes:
    # a wrapped offset can end the CUDA context), while the CPU writes the models
    # (unpatched: experts 0 40 200 first - 200's wrapped offset lands inside the tensor: silently wrong rows -
    # then 120 255, whose wrapped offsets point before it)
    ( for run in "site:0 40 200" "site:120 255" "site-p:0 40 120 200 255"; do
        s=${run%%:*}; echo "== $s experts ${run#*:}" >> "$HOME/results/moe-$s.txt"
        CUDA_LAUNCH_BLOCKING=1 PYTHONPATH=~/$s timeout 150 python3 "$G/tools/moe_offset_check.py" --experts ${run#*:} \
          >> "$HOME/results/moe-$s.txt" 2>&1; echo "exit $?" >> "$HOME/results/moe-$s.txt"
      done ) & checks=$!
    T=$G/t192
    PYTHONPATH=~/site-p python3 "$G/tests/fixtures/models/make_glm5_tiny.py" --out "$T" --mla-dims 192,64,256 --tokenizer-dir "$G/ref/hf" \
      > "$HOME/results/tiny.txt" 2>&1 && PYTHONPATH=~/site-p python3 "$G/tools/tiny_variants.py" "$T" "$T" >> "$HOME/results/tiny.txt" 2>&1
    mkdir -p "$T/hf" && cp "$T"/{config.json,generation_config.json,tokenizer.json,tokenizer_config.json,chat_template.jinja} "$T/hf/"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); json.dump({'prompts': [{'prompt_ids': p['prompt_ids'], 'greedy_ids': []} for p in r['prompts']]}, open(sys.argv[2], 'w'))" \
      "$G/ref/reference.json" "$T/reference.json"
    # transformers 5.17 (the device image) rejects layer_types "indexed_attention" (written by 5.19)
    python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c.pop('layer_types', None); json.dump(c, open(p, 'w'), indent=1)" "$T/hf/config.json"
    python3 -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); c.pop('layer_types', None); json.dump(c, open(p, 'w'), indent=1)" "$T/config.json"
    stamp "tiny: $(tail -2 "$HOME/results/tiny.txt" | cut -c1-200)"
  fi
  for q in ${QTS:-Q8_0}; do
    [ -f /root/big/glm5-shaped-$q.gguf ] || PYTHONPATH=~/site-p python3 "$G/tools/make_glm5_shaped.py" /root/big --qtype "$(echo $q | tr A-Z a-z)" >> "$HOME/results/make_glm5_shaped.txt" 2>&1
  done
  stamp "GLM-5-shaped GGUF: $(cat "$HOME/results/make_glm5_shaped.txt")"
  if [ "$phase" = start ]; then
    wait $checks; stamp "MoE offset check:"; grep -h -E '^(==|\{|exit)|Error' "$HOME/results"/moe-site.txt "$HOME/results"/moe-site-p.txt | cut -c1-300 | tail -24; pack start >/dev/null
    for n in ${UNITS_NOW:-t-q8 t-q6k t-q8-default b-tuned b-eager b-default b-q4k}; do start_unit $n ~/site-p; done
    deadline=$(( $(date +%s) + ${TINY_WAIT:-280} ))
    for n in t-q8 t-q6k t-q8-default; do
      if wait_ready $n "$deadline"; then
        PYTHONPATH=~/site-p python3 "$G/tools/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
          --model glm-5 --ref "$T" --tokens ${TOKENS:-128} --out "$HOME/results/gen-$n.json"
      else grep -m3 -E "Error|error:" "$L/$n.log" | cut -c1-300; fi
    done
    for n in t-q8 t-q6k t-q8-default; do [ -f "$L/$n.pid" ] && kill -TERM -- "-$(cat "$L/$n.pid")" 2>/dev/null; rm -f "$L/$n.pid"; done
    cd "$T"
    declare -A W=([t-q8]=tiny-glm5-Q8_0-noidx.gguf [t-q6k]=tiny-glm5-Q6_K-noidx.gguf [t-q8-default]=tiny-glm5-Q8_0-noidx.gguf)
    for n in t-q8 t-q6k t-q8-default; do
      [ -f "$HOME/results/gen-$n.json" ] || continue
      PYTHONPATH=~/site-p python3 "$G/tools/glm5_agreement.py" compare "$HOME/results/gen-$n.json" --ref "$T" \
        --weights "${W[$n]}" --label "$n vs transformers on the file's own weights" --out "$HOME/results/cmp-$n-own.json" 2>&1 | tail -1 | cut -c1-400
      PYTHONPATH=~/site-p python3 "$G/tools/glm5_agreement.py" compare "$HOME/results/gen-$n.json" --ref "$T" \
        --weights tiny-glm5-F32-0000{1,2,3}-of-00003.gguf --label "$n vs transformers on the F32 weights" \
        --out "$HOME/results/cmp-$n-f32.json" 2>&1 | tail -1 | cut -c1-400
      pack start >/dev/null
    done
    cd - >/dev/null
  elif [ "$phase" = startx2 ]; then
    for n in ${X2_UNITS:-x-ll x-nccl x-fi}; do start_unit $n ~/site-p; sleep "${X2_STAGGER:-0}"; done
  fi
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv
  pack start
  ;;
bench|benchx2)
  units=${UNITS:-b-tuned b-eager b-default b-q4k}
  deadline=$(( $(date +%s) + ${BIG_WAIT:-420} ))
  for n in $units; do wait_ready $n "$deadline"; done
  for n in $units; do
    curl -sf "http://127.0.0.1:$(port_of $n)/v1/models" >/dev/null || continue
    stamp "bench $n"
    PYTHONPATH=~/site-p timeout 120 python3 tools/vllm_bench.py --base-url "http://127.0.0.1:$(port_of $n)/v1" --model glm-5 \
      --concurrency ${CONC:-8 32} --requests-per-level 32 --max-tokens 128 --decode-requests 3 --decode-max-tokens 256 \
      --gguf "$(grep -o -- '--model [^ ]*' "$G/units/$n/vllm.service" | cut -d' ' -f2)" --num-gpus ${NGPU:-1} --gpu-name "NVIDIA H200" \
      --json "$HOME/results/bench-$n.json" 2>&1 | tee "$HOME/results/bench-$n.txt" | tail -12
    pack bench >/dev/null   # what ran so far comes back even if the call runs out of time
  done
  for n in $units; do grep -m5 -iE "attention backend|cudagraph|Graph capturing finished|allreduce|Error" "$L/$n.log" | cut -c1-250; done
  stop_all; pack bench
  ;;
esac
stamp "phase $phase done"
