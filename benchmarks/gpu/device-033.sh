#!/usr/bin/env bash
# Device side of the vllm 0.33.0 acceptance run (issue 21), run from the checkout's root on the H200
# machine. One device call per phase; the machine keeps ~/kit, ~/site and ~/gpu while the next call
# comes within ~30 s. Carried: .gpu033 (this folder's tools, module_utils, the series, the rendered
# units, the tiny models) in the first call, then one kit folder (benchmarks/gpu/make-kit-033.sh) per call.
#   stash          copy .gpu033 to ~/gpu, record nvidia-smi, then `kit 1`
#   kit N          add .kit033/c/kN to ~/kit and install every wheel now complete (kit_install.py);
#                  once torch + NCCL are in: import check; once the core group is in: vllm import check
#   tiny           series onto hard-linked copies of ~/site (both: ~/site-p; plugin only: ~/site-vu),
#                  start the tiny units (unpatched, plugin-only, bf16, float16, sparse, dense-with-indexer),
#                  agreement with transformers, sparse vs dense; meanwhile write the deeper GLM-5-shaped GGUF
#   restash        a fresh machine: stash without the checks (then `SKIP_CHECKS=1 ... kit N`)
#   inv            the float16 gap: eager float16 (TRITON_MLA, FLASH_ATTN_MLA) and eager bfloat16 units
#   big            the deeper GLM-5-shaped units (cuda profile vs vLLM defaults): start times, benchmark
#   cause          the second run (units: render-units.sh OUT v033b, FlashInfer sampler off): the float16
#                  gap, one change per unit (eager, FLASH_ATTN_MLA, both, model runner V1, router dtype
#                  of the model instead of float32 in a third site copy), bfloat16, and sparse DSA
#                  (plugin patch 0009) vs forced dense MLA on the GGUF with indexer tensors; greedy
#                  decode plus the same sequences teacher-forced through prefill, top-5 logprobs;
#                  then transformers float32 (and float16/bfloat16 on the GPU: the precision floor)
#   cause2         a fresh lease after `cause`: sparse DSA vs dense again (plugin patch 0010), and
#                  glm5_layer_diff.py: vLLM's module outputs against transformers' for one sequence
#                  of the last run (.gpu033/prev/gen-*.json), float16 and bfloat16, while they start
#   dsa            the third run (units: render-units.sh OUT v033d; plugin series with 0010, cutlass +
#                  quack-kernels in the kit): sparse DSA vs forced dense MLA on the GGUF with indexer
#                  tensors (greedy tokens, and each server's prefill on the other's sequences), bfloat16
#                  with the plugin's Triton kernels; meanwhile (MOE, default 8; 0: none) the deeper
#                  GLM-5-shaped Q4_K GGUF for `big` is written. PAIRS="SPARSE:DENSE ..." (default
#                  u-sparse:u-dense-idx): the pairs compared; FLOORS: transformers' dtypes for their compare
#   big            UNITS="b-cuda b-tri" (v033d): the plugin's CUDA kernels vs its Triton kernels
# Every server runs through benchmarks/gpu/run_unit.py (the rendered ExecStart and EnvironmentFile) with
# setsid, and is stopped by its process group before the call ends.
set -uo pipefail
phase=${1:?phase}; shift
G=$HOME/gpu; L=$HOME/logs; R=$HOME/results; mkdir -p "$L" "$R"; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
# torch 2.14 needs the carried NCCL (and cuDNN, if carried), not the image's
export LD_LIBRARY_PATH=$HOME/site/nvidia/nccl/lib:$HOME/site/nvidia/cudnn/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
t0=$(date +%s); stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { tar -C "$HOME" -czf "$OUT/$1.tgz" logs results 2>/dev/null; }

start_unit() {  # name site
  local n=$1 site=$2
  # the kit is unpacked, not pip-installed: .pth files do not run from PYTHONPATH, so the path
  # nvidia-cutlass-dsl's .pth adds (its 'cutlass' package, for the sparse DSA path) is given here
  [ -d "$site/nvidia_cutlass_dsl/dsl_packages" ] && site=$site:$site/nvidia_cutlass_dsl/dsl_packages
  # the unit's ExecStart is the role's launcher (vllm-fleet-serve = module_utils/serve_launcher.py),
  # which execs the venv's python (here the image's, with the kit on PYTHONPATH)
  setsid python3 "$G/benchmarks/gpu/run_unit.py" "$G/units/$n/vllm.service" --env-file "$G/units/$n/release.env" \
    --env-file "$G/units/$n/vllm.env" --python "$(command -v python3)" --launcher "$G/plugins/module_utils/serve_launcher.py" \
    --set PYTHONPATH="$site" > "$L/$n.log" 2>&1 < /dev/null &
  echo $! > "$L/$n.pid"; echo "$(date +%s)" > "$L/$n.t0"; stamp "started $n (pid $!, PYTHONPATH=$site)"
}
port_of() { grep -o -- '--port [0-9]*' "$G/units/$1/release.env" | cut -d' ' -f2; }
alive() { kill -0 "$(cat "$L/$1.pid")" 2>/dev/null; }
wait_ready() {  # name deadline_epoch -> 0 ready, 1 exited, 2 timeout
  local n=$1 until=$2 port; port=$(port_of "$1")
  while [ "$(date +%s)" -lt "$until" ]; do
    if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1; then
      echo $(( $(date +%s) - $(cat "$L/$n.t0") )) > "$R/ready-s-$n.txt"; stamp "$n ready"; return 0; fi
    alive "$n" || { stamp "$n exited"; return 1; }
    sleep 2
  done
  stamp "$n not ready (timeout)"; return 2
}
stop_unit() { [ -f "$L/$1.pid" ] || return 0; kill -TERM -- "-$(cat "$L/$1.pid")" 2>/dev/null; }
kill_unit() { [ -f "$L/$1.pid" ] || return 0; kill -KILL -- "-$(cat "$L/$1.pid")" 2>/dev/null; rm -f "$L/$1.pid"; }
stop_all() { for f in "$L"/*.pid; do [ -f "$f" ] && stop_unit "$(basename "$f" .pid)"; done; sleep 6
             for f in "$L"/*.pid; do [ -f "$f" ] && kill_unit "$(basename "$f" .pid)"; done; }
cause() {  # the lines that name why a server died
  grep -E "Error|error:|Exception|raise |NotImplemented|not supported|Unknown gguf|missing" "$L/$1.log" \
    | grep -v -E "^\s*$|warnings.warn|FutureWarning" | head -"${2:-8}" | cut -c1-400
}
startup_lines() {  # load, compile and graph-capture times as vLLM logs them
  grep -E "Loading weights took|Model loading took|torch.compile took|Compiling a graph|compilation.*took|Graph capturing finished|init engine|KV cache|Available KV|Using .* backend|attention backend|dense MLA|sparse|Application startup complete" \
    "$L/$1.log" | cut -c1-300 | head -40
}
kit_step() {  # N   (SKIP_CHECKS=1: no import checks, for a second session on a fresh machine)
  cp ".kit033/c/k$1"/* ~/kit/ && python3 "$G/benchmarks/gpu/kit_install.py" ~/kit ~/site | cut -c1-600
  [ -n "${SKIP_CHECKS:-}" ] && return 0
  if [ -d ~/site/torch ] && [ -d ~/site/nvidia/nccl ] && [ ! -f ~/site/.torchcheck ]; then
    PYTHONPATH=~/site timeout 120 python3 - <<'PY' 2>&1 | tail -15 | tee ~/site/.torchcheck
import torch
print("torch", torch.__version__, torch.__file__, "cuda", torch.version.cuda, torch.cuda.is_available())
print("nccl", torch.cuda.nccl.version(), "cudnn runtime", torch._C._cudnn.getRuntimeVersion() if hasattr(torch._C, "_cudnn") else None,
      "compiled", torch._C._cudnn.getCompileVersion() if hasattr(torch._C, "_cudnn") else None)
x = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16); print("matmul ok", float((x @ x).float().abs().mean()))
try:
    print("cudnn usable:", torch.backends.cudnn.is_acceptable(x.float()), torch.backends.cudnn.version())
except Exception as err:
    print("cudnn check:", type(err).__name__, str(err)[:300])
PY
  fi
  if python3 -c "import json,sys; k=json.load(open(sys.argv[1])); d=set(open(sys.argv[2]).read().split()); sys.exit(0 if all(w in d for w,e in k['wheels'].items() if e['group']=='core') else 1)" \
      ~/kit/kit.json ~/site/.kit-installed 2>/dev/null && [ ! -f ~/site/.vllmcheck ]; then
    PYTHONPATH=~/site timeout 150 python3 -c "
import vllm, vllm_gguf_plugin, triton, torch
print('vllm', vllm.__version__, vllm.__file__, 'triton', triton.__version__, 'torch', torch.__version__)
import vllm.entrypoints.openai.api_server
import vllm.models.deepseek_v32
print('api_server + deepseek_v32 import ok')
" 2>&1 | grep -v -E "^\s*$" | tail -12 | tee ~/site/.vllmcheck
  fi
}

case $phase in
stash)
  rm -rf "$G" ~/kit && mkdir -p ~/kit && cp -r .gpu033 "$G" && stamp "stashed $(du -sh "$G" | cut -f1)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total,compute_cap --format=csv | tee "$OUT/h200-1gpu.query.csv"
  nvidia-smi -q -x > "$OUT/h200-1gpu.q.xml" 2>/dev/null
  echo "LD_LIBRARY_PATH(image)=${LD_LIBRARY_PATH#*cudnn/lib}"; df -h "$HOME" | tail -1; nproc; free -g | head -2
  python3 -c "import sys, numpy, numba, cuda.bindings; print(sys.version.split()[0], 'numpy', numpy.__version__, 'numba', numba.__version__, 'cuda-bindings', cuda.bindings.__version__)" 2>&1 | tail -1
  kit_step 1
  # with the image's torch + transformers (gguf-py from .gpu033/pylib): a self-test of the compare
  # code, and transformers' own float16/bfloat16 floor on the sequences of the last run's servers
  # (docs/gpu-results/v033/gen-*.json, same generator, same file), while the kit is on its way
  if [ -d "$G/pylib" ]; then
    mkdir -p "$R/prev" && cp docs/gpu-results/v033/gen-t-f16.json docs/gpu-results/v033/gen-t-bf16.json "$R/prev/" 2>/dev/null
    ( cd "$G/t192" && PYTHONPATH=$G/pylib timeout 120 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare "$G/test/gen-mock.json" \
        "$R"/prev/gen-t-*.json --ref "$G/t192" --weights tiny-glm5-Q8_0-noidx.gguf --out-dir "$R/prev" \
        --floor-dtypes float16 bfloat16 ) 2>&1 | tail -6 | cut -c1-700
    pack stash
  fi
  ;;
kit)
  kit_step "$1"
  ;;
restash)  # a fresh machine: .gpu033 and the first kit folder, no checks
  rm -rf "$G" ~/kit && mkdir -p ~/kit && cp -r .gpu033 "$G" && SKIP_CHECKS=1 kit_step 1
  ;;
tiny)
  python3 "$G/benchmarks/gpu/kit_install.py" ~/kit ~/site | cut -c1-300
  # hard-linked copies: the series replace files atomically (new inode), so ~/site stays pristine
  rm -rf ~/site-p ~/site-vu && cp -al ~/site ~/site-p && cp -al ~/site ~/site-vu
  PYTHONPATH=$G python3 - <<'PY' 2>&1 | tee "$R/patch.txt"
import json, os
from pathlib import Path
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
home, series = Path(os.path.expanduser("~")), Path(os.path.expanduser("~/gpu/series"))
for site, dists in (("site-p", ("vllm", "vllm-gguf-plugin")), ("site-vu", ("vllm-gguf-plugin",))):
    for dist in dists:
        r = apply_series(home / site, series, dist).as_dict()
        print(site, json.dumps({k: r[k] for k in ("distribution", "version", "series_id", "action")}))
PY
  stamp "patched"
  # the deeper GLM-5-shaped model for `big`, written while the tiny servers start
  mkdir -p /root/big
  ( [ -f /root/big/glm5-shaped-Q4_K.gguf ] || PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/make_glm5_shaped.py" /root/big \
      --qtype q4_k --dense 1 --moe "${MOE:-8}" > "$R/make_glm5_shaped.txt" 2>&1 ) & writer=$!
  start_unit t-unp ~/site; start_unit t-vu ~/site-vu
  for n in t-bf16 t-f16 t-sparse t-dense-idx; do start_unit $n ~/site-p; done
  deadline=$(( t0 + ${TINY_WAIT:-420} ))
  for n in t-unp t-vu; do
    wait_ready $n "$(( t0 + ${FAIL_WAIT:-300} ))"; echo "rc $?" > "$R/$n.status"; cause $n 10 > "$R/cause-$n.txt"
    stamp "$n: $(head -c 1200 "$R/cause-$n.txt")"; stop_unit $n
  done
  for n in t-bf16 t-f16 t-sparse t-dense-idx; do
    case $n in t-sparse|t-dense-idx) T=$G/t192i;; *) T=$G/t192;; esac
    if wait_ready $n "$deadline"; then
      PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
        --model glm-5 --ref "$T" --tokens ${TOKENS:-128} --out "$R/gen-$n.json" 2>&1 | tail -2 | cut -c1-300
    else cause $n 10 | tee "$R/cause-$n.txt"; fi
    startup_lines $n > "$R/startup-$n.txt"
  done
  pack tiny
  stop_all
  grep -h -E "dense MLA|DSA|sparse|backend" "$L"/t-*.log | cut -c1-300 | sort | uniq -c | head -30 > "$R/dsa-lines.txt"
  cat "$R/dsa-lines.txt"
  cd "$G/t192"
  for n in t-bf16 t-f16; do
    [ -f "$R/gen-$n.json" ] && PYTHONPATH=~/site-p timeout 120 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare "$R/gen-$n.json" \
      --ref "$G/t192" --weights tiny-glm5-Q8_0-noidx.gguf --label "$n vs transformers on the file's own weights" \
      --out "$R/cmp-$n.json" 2>&1 | tail -1 | cut -c1-900
  done
  cd - >/dev/null
  [ -f "$R/gen-t-sparse.json" ] && [ -f "$R/gen-t-dense-idx.json" ] && PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/glm5_agreement.py" \
    same "$R/gen-t-sparse.json" "$R/gen-t-dense-idx.json" --label "sparse DSA vs forced dense MLA, indexer present" \
    --out "$R/same-sparse-dense.json" | cut -c1-600
  wait $writer; stamp "GLM-5-shaped: $(tail -2 "$R/make_glm5_shaped.txt" | cut -c1-300)"; df -h /root | tail -1
  pack tiny
  ;;
inv)
  # float16 agreement on 0.33.0 (92.2 %) vs 0.26.0 (98.4 %): the t-f16 / t-bf16 renders with one
  # change each (derived from the rendered env file with sed, so the rest stays the role's)
  if [ ! -d ~/site-p ]; then
    cp -al ~/site ~/site-p && PYTHONPATH=$G python3 -c "
import os; from pathlib import Path; from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
for d in ('vllm', 'vllm-gguf-plugin'): print(apply_series(Path(os.path.expanduser('~/site-p')), Path(os.path.expanduser('~/gpu/series')), d).as_dict()['series_id'])
" | tee "$R/patch-inv.txt"
  fi
  U=$G/units
  derive() {  # new port base sed-expression
    local n=$1 p=$2 b=$3 e=$4; mkdir -p "$U/$n"; cp "$U/$b/vllm.service" "$U/$b/vllm.env" "$U/$n/"
    sed -e "s/--port 81[0-9][0-9]/--port $p/" -e "s|/vh/$b/|/vh/$n/|" -e "$e" "$U/$b/release.env" > "$U/$n/release.env"
  }
  derive i-f16-eager 8121 t-f16 "s/^FLEET_TUNING_ARGS='/FLEET_TUNING_ARGS='--enforce-eager /"
  derive i-f16-eager-fa 8122 t-f16 "s/^FLEET_TUNING_ARGS=.*/FLEET_TUNING_ARGS='--enforce-eager --attention-backend FLASH_ATTN_MLA'/"
  derive i-bf16-eager 8123 t-bf16 "s/^FLEET_TUNING_ARGS='/FLEET_TUNING_ARGS='--enforce-eager /"
  units="i-f16-eager i-f16-eager-fa i-bf16-eager"
  for n in $units; do start_unit $n ~/site-p; done
  deadline=$(( t0 + ${INV_WAIT:-170} ))
  for n in $units; do
    if wait_ready $n "$deadline"; then
      PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
        --model glm-5 --ref "$G/t192" --tokens 128 --out "$R/gen-$n.json" 2>&1 | tail -1 | cut -c1-120
    else cause $n 6 | tee "$R/cause-$n.txt"; fi
    grep -E "Using .*backend" "$L/$n.log" | cut -c1-160 | head -2
  done
  pack inv; stop_all
  cd "$G/t192"
  for n in $units; do
    [ -f "$R/gen-$n.json" ] && PYTHONPATH=~/site-p timeout 60 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare "$R/gen-$n.json" \
      --ref "$G/t192" --weights tiny-glm5-Q8_0-noidx.gguf --label "$n" --out "$R/cmp-$n.json" 2>&1 | tail -1 | cut -c1-700
    pack inv
  done
  cd - >/dev/null
  ;;
cause)
  python3 "$G/benchmarks/gpu/kit_install.py" ~/kit ~/site | cut -c1-300
  rm -rf ~/site-p ~/site-r && cp -al ~/site ~/site-p
  PYTHONPATH=$G python3 -c "
import json, os; from pathlib import Path; from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
for d in ('vllm', 'vllm-gguf-plugin'):
    r = apply_series(Path(os.path.expanduser('~/site-p')), Path(os.path.expanduser('~/gpu/series')), d).as_dict()
    print('site-p', json.dumps({k: r[k] for k in ('distribution', 'version', 'series_id', 'action')}))
" 2>&1 | tee "$R/patch.txt"
  # site-r: site-p with vLLM's forced float32 router for glm_moe_dsa removed (router in the model's
  # dtype). A diagnostic copy only; written as a new file, since the copies share inodes.
  cp -al ~/site-p ~/site-r && python3 - <<'PY' 2>&1 | tee "$R/router-edit.txt"
import os
p = os.path.expanduser("~/site-r/vllm/model_executor/models/deepseek_v2.py")
s = open(p).read()
old = """    if getattr(config, "model_type", None) == "glm_moe_dsa":
        # Older GLM-5/5.2 configs require fp32 routing but do not expose
        # moe_router_dtype yet.
        return torch.float32
"""
print("router edit:", "applied" if old in s else "NOT FOUND")
open(p + ".new", "w").write(s.replace(old, ""))
os.replace(p + ".new", p)
PY
  stamp "sites ready"
  units=${UNITS:-u-f16 u-f16-eager u-f16-fa u-f16-fa-eager u-f16-v1 u-f16-r16 u-bf16 u-dense-idx u-sparse}
  for n in $units; do case $n in u-f16-r16) start_unit $n ~/site-r;; *) start_unit $n ~/site-p;; esac; done
  deadline=$(( t0 + ${CAUSE_WAIT:-340} ))
  for n in $units; do
    case $n in u-sparse|u-dense-idx) T=$G/t192i;; *) T=$G/t192;; esac
    if wait_ready $n "$deadline"; then
      PYTHONPATH=~/site-p timeout 60 python3 "$G/benchmarks/gpu/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
        --model glm-5 --ref "$T" --tokens 128 --top-logprobs 5 --prefill --out "$R/gen-$n.json" 2>&1 | tail -2 | cut -c1-300
    else cause $n 10 | tee "$R/cause-$n.txt"; fi
    startup_lines $n > "$R/startup-$n.txt"
    grep -E "Using .*backend|dense MLA|DSA|model runner|ModelRunner|FlashInfer|flashinfer" "$L/$n.log" | cut -c1-220 | sort -u | head -8
  done
  pack cause
  stop_all
  cd "$G/t192"
  gens=$(ls "$R"/gen-u-f16*.json "$R"/gen-u-bf16.json 2>/dev/null)
  [ -n "$gens" ] && PYTHONPATH=~/site-p timeout 200 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare $gens \
    --ref "$G/t192" --weights tiny-glm5-Q8_0-noidx.gguf --out-dir "$R" --floor-dtypes float16 bfloat16 2>&1 | cut -c1-900
  pack cause
  cd "$G/t192i"
  gens=$(ls "$R"/gen-u-sparse.json "$R"/gen-u-dense-idx.json 2>/dev/null)
  [ -n "$gens" ] && PYTHONPATH=~/site-p timeout 120 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare $gens \
    --ref "$G/t192i" --weights tiny-glm5-Q8_0-idx.gguf --out-dir "$R" --floor-dtypes bfloat16 2>&1 | cut -c1-900
  cd - >/dev/null
  [ -f "$R/gen-u-sparse.json" ] && [ -f "$R/gen-u-dense-idx.json" ] && PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/glm5_agreement.py" \
    same "$R/gen-u-sparse.json" "$R/gen-u-dense-idx.json" --label "sparse DSA vs forced dense MLA, indexer present" \
    --out "$R/same-sparse-dense.json" | cut -c1-600
  pack cause
  ;;
cause2)
  python3 "$G/benchmarks/gpu/kit_install.py" ~/kit ~/site | cut -c1-300
  rm -rf ~/site-p && cp -al ~/site ~/site-p
  PYTHONPATH=$G python3 -c "
import json, os; from pathlib import Path; from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
for d in ('vllm', 'vllm-gguf-plugin'):
    r = apply_series(Path(os.path.expanduser('~/site-p')), Path(os.path.expanduser('~/gpu/series')), d).as_dict()
    print('site-p', json.dumps({k: r[k] for k in ('distribution', 'version', 'series_id', 'action')}))
" 2>&1 | tee "$R/patch2.txt"
  units=${UNITS:-u-dense-idx u-sparse}
  for n in $units; do start_unit $n ~/site-p; done
  # meanwhile, in this process group: the module-by-module diff (in-process vLLM, eager)
  ( cd "$G/t192" && for spec in "float16 gen-u-f16.json" "bfloat16 gen-u-bf16.json"; do set -- $spec
      [ $(( $(date +%s) - t0 )) -lt ${DIFF_UNTIL:-250} ] || break
      PYTHONPATH=~/site-p:$G/benchmarks/gpu timeout 150 python3 "$G/benchmarks/gpu/glm5_layer_diff.py" --gguf "$G/t192/tiny-glm5-Q8_0-noidx.gguf" \
        --hf "$G/t192/hf" --gen "$G/prev/$2" --seq 0 --dtype "$1" --out "$R/layer-diff-$1.json" > "$L/layer-diff-$1.log" 2>&1
      echo "layer diff $1 rc $?"; grep -v -E "^\(|INFO|WARNING|^\s*$" "$L/layer-diff-$1.log" | tail -40 | cut -c1-200
    done ) &
  differ=$!
  deadline=$(( t0 + ${CAUSE_WAIT:-330} ))
  for n in $units; do
    if wait_ready $n "$deadline"; then
      PYTHONPATH=~/site-p timeout 60 python3 "$G/benchmarks/gpu/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
        --model glm-5 --ref "$G/t192i" --tokens 128 --top-logprobs 5 --prefill --out "$R/gen-$n.json" 2>&1 | tail -2 | cut -c1-300
    else cause $n 12 | tee "$R/cause-$n.txt"; fi
    startup_lines $n > "$R/startup-$n.txt"
    grep -E "Using .*backend|dense MLA|DSA|sparse|DeepGEMM|deep_gemm|indexer" "$L/$n.log" | cut -c1-220 | sort -u | head -8
  done
  pack cause2
  stop_all
  wait $differ
  cd "$G/t192i"
  gens=$(ls "$R"/gen-u-sparse.json "$R"/gen-u-dense-idx.json 2>/dev/null)
  [ -n "$gens" ] && PYTHONPATH=~/site-p timeout 120 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare $gens \
    --ref "$G/t192i" --weights tiny-glm5-Q8_0-idx.gguf --out-dir "$R" --floor-dtypes bfloat16 2>&1 | cut -c1-900
  cd - >/dev/null
  [ -f "$R/gen-u-sparse.json" ] && [ -f "$R/gen-u-dense-idx.json" ] && PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/glm5_agreement.py" \
    same "$R/gen-u-sparse.json" "$R/gen-u-dense-idx.json" --label "sparse DSA vs forced dense MLA, indexer present" \
    --out "$R/same-sparse-dense.json" | cut -c1-600
  pack cause2
  ;;
cause3)
  # after cause2: the float16 cause (the plugin's CUDA kernels vs its Triton ones, VLLM_GGUF_USE_CUDA=0)
  # and sparse DSA with the cutlass DSL on the path
  python3 "$G/benchmarks/gpu/kit_install.py" ~/kit ~/site | cut -c1-300
  rm -rf ~/site-p && cp -al ~/site ~/site-p
  PYTHONPATH=$G python3 -c "
import json, os; from pathlib import Path; from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
for d in ('vllm', 'vllm-gguf-plugin'):
    r = apply_series(Path(os.path.expanduser('~/site-p')), Path(os.path.expanduser('~/gpu/series')), d).as_dict()
    print('site-p', json.dumps({k: r[k] for k in ('distribution', 'version', 'series_id', 'action')}))
" 2>&1 | tee "$R/patch3.txt"
  units=${UNITS:-u-f16-tri u-f16-tri-eager u-bf16-tri u-dense-idx u-sparse}
  for n in $units; do start_unit $n ~/site-p; done
  ( PYTHONPATH=~/site-p timeout 100 python3 -c "
import vllm_gguf_plugin.ops as o
print('plugin CUDA extension available', o._CUDA_AVAILABLE, 'enabled', o._CUDA_ENABLED, o._C_gguf)
" 2>&1 | tail -2 | tee "$R/plugin-cuda.txt"
    cd "$G/t192" && VLLM_GGUF_USE_CUDA=0 PYTHONPATH=~/site-p:$G/benchmarks/gpu timeout 150 python3 "$G/benchmarks/gpu/glm5_layer_diff.py" \
      --gguf "$G/t192/tiny-glm5-Q8_0-noidx.gguf" --hf "$G/t192/hf" --gen "$G/prev/gen-u-f16.json" --seq 0 --dtype float16 \
      --out "$R/layer-diff-float16-triton.json" > "$L/layer-diff-float16-triton.log" 2>&1
    echo "layer diff float16 triton rc $?"; grep -v -E "^\(|INFO|WARNING|^\s*$" "$L/layer-diff-float16-triton.log" | tail -40 | cut -c1-200 ) &
  differ=$!
  deadline=$(( t0 + ${CAUSE_WAIT:-300} ))
  for n in $units; do
    case $n in u-sparse|u-dense-idx) T=$G/t192i;; *) T=$G/t192;; esac
    if wait_ready $n "$deadline"; then
      PYTHONPATH=~/site-p timeout 60 python3 "$G/benchmarks/gpu/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
        --model glm-5 --ref "$T" --tokens 128 --top-logprobs 5 --prefill --out "$R/gen-$n.json" 2>&1 | tail -2 | cut -c1-300
    else cause $n 12 | tee "$R/cause-$n.txt"; fi
    startup_lines $n > "$R/startup-$n.txt"
  done
  pack cause3
  stop_all
  wait $differ
  cd "$G/t192"
  gens=$(ls "$R"/gen-u-*tri*.json 2>/dev/null)
  [ -n "$gens" ] && PYTHONPATH=~/site-p timeout 150 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare $gens \
    --ref "$G/t192" --weights tiny-glm5-Q8_0-noidx.gguf --out-dir "$R" --floor-dtypes float16 bfloat16 2>&1 | grep -v Warn | cut -c1-700
  pack cause3
  cd "$G/t192i"
  gens=$(ls "$R"/gen-u-sparse.json "$R"/gen-u-dense-idx.json 2>/dev/null)
  [ -n "$gens" ] && PYTHONPATH=~/site-p timeout 100 python3 "$G/benchmarks/gpu/glm5_agreement.py" compare $gens \
    --ref "$G/t192i" --weights tiny-glm5-Q8_0-idx.gguf --out-dir "$R" --floor-dtypes bfloat16 2>&1 | grep -v Warn | cut -c1-700
  cd - >/dev/null
  [ -f "$R/gen-u-sparse.json" ] && [ -f "$R/gen-u-dense-idx.json" ] && PYTHONPATH=~/site-p python3 "$G/benchmarks/gpu/glm5_agreement.py" \
    same "$R/gen-u-sparse.json" "$R/gen-u-dense-idx.json" --label "sparse DSA vs forced dense MLA, indexer present" \
    --out "$R/same-sparse-dense.json" | cut -c1-600
  pack cause3
  ;;
dsa)
  python3 "$G/benchmarks/gpu/kit_install.py" ~/kit ~/site | cut -c1-300
  rm -rf ~/site-p && cp -al ~/site ~/site-p
  PYTHONPATH=$G python3 -c "
import json, os; from pathlib import Path; from ansible_collections.vllm_fleet.fleet.plugins.module_utils.patch_series import apply_series
for d in ('vllm', 'vllm-gguf-plugin'):
    r = apply_series(Path(os.path.expanduser('~/site-p')), Path(os.path.expanduser('~/gpu/series')), d).as_dict()
    print('site-p', json.dumps({k: r[k] for k in ('distribution', 'version', 'series_id', 'action')}))
" 2>&1 | tee "$R/patch-dsa.txt"
  units=${UNITS:-u-dense-idx u-sparse u-bf16-tri}
  for n in $units; do start_unit $n ~/site-p; done
  writer=
  if [ "${MOE:-8}" != 0 ]; then
    mkdir -p /root/big
    ( [ -f /root/big/glm5-shaped-Q4_K.gguf ] || PYTHONPATH=~/site-p nice python3 "$G/benchmarks/gpu/make_glm5_shaped.py" /root/big \
        --qtype q4_k --dense 1 --moe "${MOE:-8}" > "$R/make_glm5_shaped.txt" 2>&1 ) & writer=$!
  fi
  deadline=$(( t0 + ${CAUSE_WAIT:-330} ))
  for n in $units; do
    case $n in u-sparse*|u-dense*) T=$G/t192i;; *) T=$G/t192;; esac
    if wait_ready $n "$deadline"; then
      PYTHONPATH=~/site-p timeout 60 python3 "$G/benchmarks/gpu/glm5_agreement.py" generate --base-url "http://127.0.0.1:$(port_of $n)/v1" \
        --model glm-5 --ref "$T" --tokens 128 --top-logprobs 5 --prefill --out "$R/gen-$n.json" 2>&1 | tail -2 | cut -c1-300
    else cause $n 12 | tee "$R/cause-$n.txt"; tail -40 "$L/$n.log" | cut -c1-300 > "$R/tail-$n.txt"; fi
    startup_lines $n > "$R/startup-$n.txt"
    grep -E "Using .*backend|dense MLA|DSA|sparse|DeepGEMM|deep_gemm|indexer|cutlass|quack|CuTe" "$L/$n.log" | cut -c1-220 | sort -u | head -12 \
      | tee "$R/lines-$n.txt"
  done
  # each server's prefill on the other's greedy sequences: both predict every position from the same input
  G2=$G/benchmarks/gpu/glm5_agreement.py
  pairs=${PAIRS:-u-sparse:u-dense-idx}
  for pair in $pairs; do sp=${pair%%:*} de=${pair#*:}
    for xy in "$sp $de" "$de $sp"; do set -- $xy
      [ -f "$R/gen-$2.json" ] && curl -sf "http://127.0.0.1:$(port_of $1)/v1/models" >/dev/null && PYTHONPATH=~/site-p timeout 60 \
        python3 "$G2" prefill "$R/gen-$2.json" --base-url "http://127.0.0.1:$(port_of $1)/v1" \
        --model glm-5 --out "$R/xpf-$1-on-$2.json" 2>&1 | tail -1 | cut -c1-300
    done
  done
  pack dsa
  stop_all
  for pair in $pairs; do sp=${pair%%:*} de=${pair#*:}
    [ -f "$R/gen-$sp.json" ] && [ -f "$R/gen-$de.json" ] || continue
    PYTHONPATH=~/site-p python3 "$G2" same "$R/gen-$sp.json" "$R/gen-$de.json" \
      --label "$sp vs $de (indexer present): greedy tokens" --out "$R/same-$sp-$de.json" | cut -c1-700
    [ -f "$R/xpf-$sp-on-$de.json" ] && PYTHONPATH=~/site-p python3 "$G2" same "$R/gen-$de.json" "$R/xpf-$sp-on-$de.json" \
      --field prefill_argmax --label "prefill argmax on $de's sequences: $de vs $sp" --out "$R/same-prefill-$sp-on-$de.json" | cut -c1-700
    [ -f "$R/xpf-$de-on-$sp.json" ] && PYTHONPATH=~/site-p python3 "$G2" same "$R/gen-$sp.json" "$R/xpf-$de-on-$sp.json" \
      --field prefill_argmax --label "prefill argmax on $sp's sequences: $sp vs $de" --out "$R/same-prefill-$de-on-$sp.json" | cut -c1-700
  done
  pack dsa
  cd "$G/t192i"
  gens=$(for pair in $pairs; do for n in ${pair%%:*} ${pair#*:}; do [ -f "$R/gen-$n.json" ] && echo "$R/gen-$n.json"; done; done)
  [ -n "$gens" ] && PYTHONPATH=~/site-p timeout 150 python3 "$G2" compare $gens \
    --ref "$G/t192i" --weights tiny-glm5-Q8_0-idx.gguf --out-dir "$R" --floor-dtypes ${FLOORS:-bfloat16} 2>&1 | grep -v Warn | cut -c1-700
  cd "$G/t192"
  [ -f "$R/gen-u-bf16-tri.json" ] && PYTHONPATH=~/site-p timeout 100 python3 "$G2" compare "$R/gen-u-bf16-tri.json" \
    --ref "$G/t192" --weights tiny-glm5-Q8_0-noidx.gguf --out-dir "$R" --floor-dtypes float16 bfloat16 2>&1 | grep -v Warn | cut -c1-700
  cd - >/dev/null
  pack dsa
  if [ -n "$writer" ]; then wait $writer; stamp "GLM-5-shaped: $(tail -2 "$R/make_glm5_shaped.txt" | cut -c1-300)"; df -h /root | tail -1; fi
  pack dsa
  ;;
big)
  units=${UNITS:-b-tuned b-default}
  for n in $units; do start_unit $n ~/site-p; done
  deadline=$(( t0 + ${BIG_WAIT:-400} ))
  for n in $units; do wait_ready $n "$deadline" || cause $n 10 | tee "$R/cause-$n.txt"; done
  for n in $units; do
    startup_lines $n > "$R/startup-$n.txt"
    curl -sf "http://127.0.0.1:$(port_of $n)/v1/models" >/dev/null || continue
    stamp "bench $n"
    PYTHONPATH=~/site-p timeout ${BENCH_TIMEOUT:-110} python3 "$G/tools/vllm_bench.py" --base-url "http://127.0.0.1:$(port_of $n)/v1" \
      --model glm-5 --concurrency ${CONC:-8 32} --requests-per-level 32 --max-tokens 128 --decode-requests 3 \
      --decode-max-tokens 256 --gguf /root/big/glm5-shaped-Q4_K.gguf --num-gpus 1 --gpu-name "NVIDIA H200" \
      --json "$R/bench-$n.json" 2>&1 | tee "$R/bench-$n.txt" | tail -8
    pack big
  done
  for n in $units; do echo "== $n"; cat "$R/startup-$n.txt" | head -14; done
  stop_all; pack big
  ;;
esac
nvidia-smi --query-gpu=memory.used --format=csv,noheader
stamp "phase $phase done"
