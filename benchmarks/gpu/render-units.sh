#!/usr/bin/env bash
# Renders, with benchmarks/gpu/render-unit.yml, the units the GPU acceptance run starts, into OUT/<name>/.
# Each is the cuda profile of inventory/example-blackwell with only the device-specific values
# (model path, port, GPU share, TP size) and the one setting under test changed.
# usage: render-units.sh OUT [single|x2|v033|v033b|v033c|v033d|tp N]
#   v033: the vllm 0.33.0 acceptance set (issue 21): tiny GLM-5 without indexer (bf16, float16; the
#         unpatched runs use the same renders with another PYTHONPATH), tiny GLM-5 with indexer
#         (sparse DSA vs forced dense), the deeper GLM-5-shaped Q4_K model (cuda profile vs defaults)
#   v033b: the second vllm 0.33.0 run (the float16 gap): every unit with VLLM_USE_FLASHINFER_SAMPLER=0
#         (vLLM's own sampler: no FlashInfer JIT build at the first start); float16 with the cuda
#         profile and one change each (eager, FLASH_ATTN_MLA, both, model runner V1, a second copy
#         for a site whose router dtype is edited on the device), bfloat16, and the indexer pair
#   v033d: the third run: the indexer pair (sparse DSA vs forced dense; also with the plugin's Triton
#         kernels in bfloat16 and float16), bfloat16 with the plugin's Triton kernels, and the deeper
#         model with the plugin's CUDA kernels (b-cuda) vs its Triton kernels (b-tri)
#   tp N: the cuda-profile render of that deeper model at tensor parallel size N (2 or 8)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: render-units.sh OUT [single|x2|v033|v033b|v033c|v033d|tp N]}; set_=${2:-single}; tp=${3:-2}
G=/root/gpu; B=/root/big
render() {  # name port model tokenizer [-e k=v ...]
  local name=$1 port=$2 model=$3 tok=$4; shift 4
  .venv/bin/ansible-playbook benchmarks/gpu/render-unit.yml -e ansible_python_interpreter="$PWD/.venv/bin/python" -e render_out="$out/$name" \
    -e render_site="$PWD/inventory/example-blackwell" -e vllm_service_model="$model" \
    -e vllm_service_tokenizer="$tok" -e vllm_service_host=127.0.0.1 -e vllm_service_port="$port" \
    -e vllm_service_home="/root/vh/$name" -e vllm_service_drain_seconds=5 "$@" >/dev/null
}
tiny=(-e vllm_service_max_model_len=4096 -e vllm_service_tensor_parallel_size=1 -e vllm_service_gpu_memory_utilization=0.04
      -e '{"vllm_service_extra_args": ["--kv-cache-memory-bytes", "1073741824"]}')
big=(-e vllm_service_max_model_len=8192 -e vllm_service_gpu_memory_utilization=0.25)
kv='"--kv-cache-memory-bytes", "4294967296"'
defaults=(-e vllm_service_nccl_proto= -e vllm_service_attention_backend= -e '{"vllm_service_compilation_config": {}}')
if [ "$set_" = single ]; then
  # tiny GLM-5 with GLM-5's own MLA head dims (192/64/256: CUDA's MLA prefill has no kernel for 64/64/64),
  # written on the device by tests/fixtures/models/make_glm5_tiny.py --mla-dims 192,64,256 + benchmarks/gpu/tiny_variants.py
  render t-q8 8102 $G/t192/tiny-glm5-Q8_0-noidx.gguf $G/t192/hf "${tiny[@]}"
  render t-q6k 8103 $G/t192/tiny-glm5-Q6_K-noidx.gguf $G/t192/hf "${tiny[@]}"
  render t-q8-default 8104 $G/t192/tiny-glm5-Q8_0-noidx.gguf $G/t192/hf "${tiny[@]}" "${defaults[@]}"
  render b-tuned 8201 $B/glm5-shaped-Q8_0.gguf $B -e vllm_service_tensor_parallel_size=1 "${big[@]}" \
    -e "{\"vllm_service_extra_args\": [$kv]}"
  render b-eager 8202 $B/glm5-shaped-Q8_0.gguf $B -e vllm_service_tensor_parallel_size=1 "${big[@]}" \
    -e "{\"vllm_service_extra_args\": [$kv, \"--enforce-eager\"]}"
  render b-default 8203 $B/glm5-shaped-Q8_0.gguf $B -e vllm_service_tensor_parallel_size=1 "${big[@]}" \
    -e "{\"vllm_service_extra_args\": [$kv]}" "${defaults[@]}"
  render b-q4k 8204 $B/glm5-shaped-Q4_K.gguf $B -e vllm_service_tensor_parallel_size=1 \
    -e vllm_service_max_model_len=8192 -e vllm_service_gpu_memory_utilization=0.12 \
    -e '{"vllm_service_extra_args": ["--kv-cache-memory-bytes", "2147483648"]}'
elif [ "$set_" = v033 ]; then
  T=$G/t192; I=$G/t192i; D=$B/glm5-shaped-Q4_K.gguf
  render t-bf16 8102 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${tiny[@]}"
  render t-f16 8103 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${tiny[@]}" -e vllm_service_dtype=float16
  render t-unp 8104 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${tiny[@]}" -e vllm_service_dtype=float16
  render t-vu 8105 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${tiny[@]}" -e vllm_service_dtype=float16
  # indexer tensors present: sparse DSA (vLLM picks the sparse MLA backend: TRITON_MLA is dense-only)
  # against the same file forced to dense MLA (the cuda profile's TRITON_MLA)
  render t-sparse 8106 $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${tiny[@]}" -e vllm_service_attention_backend= \
    -e vllm_service_dsa_attention=sparse
  render t-dense-idx 8107 $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${tiny[@]}" \
    -e vllm_service_dsa_attention=dense
  deep=(-e vllm_service_tensor_parallel_size=1 -e vllm_service_max_model_len=8192 -e vllm_service_gpu_memory_utilization=0.45
        -e "{\"vllm_service_extra_args\": [$kv]}")
  render b-tuned 8201 $D $B "${deep[@]}"
  render b-default 8203 $D $B "${deep[@]}" "${defaults[@]}"
elif [ "$set_" = v033b ]; then
  T=$G/t192; I=$G/t192i
  nofi='"VLLM_USE_FLASHINFER_SAMPLER": "0"'
  kvb='"--kv-cache-memory-bytes", "1073741824"'
  small=(-e vllm_service_max_model_len=4096 -e vllm_service_tensor_parallel_size=1 -e vllm_service_gpu_memory_utilization=0.04)
  env0=(-e "{\"vllm_service_extra_env\": {$nofi}}")
  kv0=(-e "{\"vllm_service_extra_args\": [$kvb]}")
  eager=(-e "{\"vllm_service_extra_args\": [$kvb, \"--enforce-eager\"]}")
  f16=(-e vllm_service_dtype=float16)
  render u-f16 8111 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${f16[@]}" "${env0[@]}" "${kv0[@]}"
  render u-f16-eager 8112 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${f16[@]}" "${env0[@]}" "${eager[@]}"
  render u-f16-fa 8113 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${f16[@]}" "${env0[@]}" "${kv0[@]}" \
    -e vllm_service_attention_backend=FLASH_ATTN_MLA
  render u-f16-fa-eager 8114 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${f16[@]}" "${env0[@]}" "${eager[@]}" \
    -e vllm_service_attention_backend=FLASH_ATTN_MLA
  render u-f16-v1 8115 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${f16[@]}" "${kv0[@]}" \
    -e "{\"vllm_service_extra_env\": {$nofi, \"VLLM_USE_V2_MODEL_RUNNER\": \"0\"}}"
  render u-f16-r16 8116 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${f16[@]}" "${env0[@]}" "${kv0[@]}"
  render u-bf16 8117 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${env0[@]}" "${kv0[@]}"
  render u-sparse 8118 $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${small[@]}" "${env0[@]}" "${kv0[@]}" \
    -e vllm_service_attention_backend= -e vllm_service_dsa_attention=sparse
  render u-dense-idx 8119 $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${small[@]}" "${env0[@]}" "${kv0[@]}" \
    -e vllm_service_dsa_attention=dense
elif [ "$set_" = v033c ]; then
  # the float16 cause found in v033b: the plugin's CUDA kernels (ggml_mul_mat_a8 / ggml_moe_a8, llama.cpp's
  # MMQ/MMVQ) quantize activations to 8 bits; VLLM_GGUF_USE_CUDA=0 selects its Triton kernels instead
  T=$G/t192
  tri='"VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_GGUF_USE_CUDA": "0"'
  kvb='"--kv-cache-memory-bytes", "1073741824"'
  small=(-e vllm_service_max_model_len=4096 -e vllm_service_tensor_parallel_size=1 -e vllm_service_gpu_memory_utilization=0.04)
  envt=(-e "{\"vllm_service_extra_env\": {$tri}}")
  render u-f16-tri 8121 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" -e vllm_service_dtype=float16 "${envt[@]}" \
    -e "{\"vllm_service_extra_args\": [$kvb]}"
  render u-f16-tri-eager 8122 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" -e vllm_service_dtype=float16 "${envt[@]}" \
    -e "{\"vllm_service_extra_args\": [$kvb, \"--enforce-eager\"]}"
  render u-bf16-tri 8123 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" "${envt[@]}" -e "{\"vllm_service_extra_args\": [$kvb]}"
elif [ "$set_" = v033d ]; then
  # the third run (2026-12-03): the indexer pair and bfloat16 with the Triton kernels as in v033b/v033c,
  # and the deeper GLM-5-shaped Q4_K model with the plugin's CUDA kernels against its Triton kernels
  # (VLLM_GGUF_USE_CUDA=0), both with the FlashInfer sampler off and otherwise the cuda profile
  T=$G/t192; I=$G/t192i; D=$B/glm5-shaped-Q4_K.gguf
  nofi='"VLLM_USE_FLASHINFER_SAMPLER": "0"'
  tri='"VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_GGUF_USE_CUDA": "0"'
  kvb='"--kv-cache-memory-bytes", "1073741824"'
  small=(-e vllm_service_max_model_len=4096 -e vllm_service_tensor_parallel_size=1 -e vllm_service_gpu_memory_utilization=0.04
         -e "{\"vllm_service_extra_args\": [$kvb]}")
  render u-sparse 8118 $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${small[@]}" -e "{\"vllm_service_extra_env\": {$nofi}}" \
    -e vllm_service_attention_backend= -e vllm_service_dsa_attention=sparse
  render u-dense-idx 8119 $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${small[@]}" -e "{\"vllm_service_extra_env\": {$nofi}}" \
    -e vllm_service_dsa_attention=dense
  render u-bf16-tri 8123 $T/tiny-glm5-Q8_0-noidx.gguf $T/hf "${small[@]}" -e "{\"vllm_service_extra_env\": {$tri}}"
  # the indexer pair again with the plugin's Triton kernels (no 8-bit activations), bfloat16 and float16
  for dt in bf16 f16; do
    d=(); [ $dt = f16 ] && d=(-e vllm_service_dtype=float16)
    port=$([ $dt = f16 ] && echo 8126 || echo 8124)
    render u-sparse-tri-$dt $port $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${small[@]}" "${d[@]}" \
      -e "{\"vllm_service_extra_env\": {$tri}}" -e vllm_service_attention_backend= -e vllm_service_dsa_attention=sparse
    render u-dense-tri-$dt $((port + 1)) $I/tiny-glm5-Q8_0-idx.gguf $I/hf "${small[@]}" "${d[@]}" \
      -e "{\"vllm_service_extra_env\": {$tri}}" -e vllm_service_dsa_attention=dense
  done
  deep=(-e vllm_service_tensor_parallel_size=1 -e vllm_service_max_model_len=8192 -e vllm_service_gpu_memory_utilization=0.45
        -e "{\"vllm_service_extra_args\": [$kv]}")
  render b-cuda 8211 $D $B "${deep[@]}" -e "{\"vllm_service_extra_env\": {$nofi}}"
  render b-tri 8212 $D $B "${deep[@]}" -e "{\"vllm_service_extra_env\": {$tri}}"
elif [ "$set_" = tp ]; then
  render "tp$tp" $((8300 + tp)) $B/glm5-shaped-Q4_K.gguf $B -e vllm_service_tensor_parallel_size="$tp" \
    -e vllm_service_max_model_len=8192 -e vllm_service_gpu_memory_utilization=0.85 -e "{\"vllm_service_extra_args\": [$kv]}"
else
  x2=(-e vllm_service_tensor_parallel_size=2 "${big[@]}" -e "{\"vllm_service_extra_args\": [$kv]}")
  nofuse='{"vllm_service_compilation_config": {"cudagraph_mode": "FULL_AND_PIECEWISE", "pass_config": {"fuse_allreduce_rms": false}}}'
  render x-ll 8301 $B/glm5-shaped-Q8_0.gguf $B "${x2[@]}"
  render x-nccl 8302 $B/glm5-shaped-Q8_0.gguf $B "${x2[@]}" -e vllm_service_nccl_proto=
  render x-fi 8303 $B/glm5-shaped-Q8_0.gguf $B "${x2[@]}" -e '{"vllm_service_extra_env": {"VLLM_ALLREDUCE_USE_FLASHINFER": "1"}}'
  render x-ll-nofuse 8304 $B/glm5-shaped-Q8_0.gguf $B "${x2[@]}" -e "$nofuse"
fi
ls "$out"
