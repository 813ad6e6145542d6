#!/usr/bin/env python3
"""Greedy reference tokens of a GGUF model from Hugging Face transformers (an implementation
independent of vLLM), for the model profile's coherence cases (expect_token_ids).

Run it with a Python that has torch, transformers and gguf - e.g. the cpu profile's venv on a test host:
  podman cp tools/demo_reference.py vllm-fleet-local:/tmp/ && podman exec vllm-fleet-local \
    /opt/vllm-fleet/envs/vllm-cpu-*/bin/python /tmp/demo_reference.py \
    /var/lib/vllm-fleet/models/demo-qwen3 demo-qwen3-F32.gguf 16 "The capital of France is" "Write a haiku about GPUs:"
Prints the cases as YAML-ready JSON.
"""

from __future__ import annotations

import json
import sys


def hf_state_dict(gguf_path: str, model, torch) -> dict:
    """The GGUF's tensors under the Hugging Face names, through gguf's own name map (no permutation:
    qwen-family converters store q/k as they are)."""
    import gguf

    reader = gguf.GGUFReader(gguf_path)
    arch = next(arch for arch, name in gguf.MODEL_ARCH_NAMES.items()
                if name == reader.fields["general.architecture"].contents())
    name_map = gguf.get_tensor_name_map(arch, model.config.num_hidden_layers)
    by_gguf_name = {}
    for hf_name in model.state_dict():
        mapped = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if mapped:
            by_gguf_name[mapped] = hf_name
    return {by_gguf_name[t.name]: torch.from_numpy(t.data.copy()).float() for t in reader.tensors if t.name in by_gguf_name}


def main() -> int:
    model_dir, gguf_name, max_tokens, *prompts = sys.argv[1:]
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(hf_state_dict(f"{model_dir}/{gguf_name}", model, torch), strict=False)
    if [name for name in missing if name != "lm_head.weight"] or unexpected:
        raise SystemExit(f"GGUF does not match the config: missing {missing}, unexpected {unexpected}")
    if "lm_head.weight" in missing:
        model.tie_weights()
    model.eval()
    cases = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=int(max_tokens), do_sample=False)
        cases.append({"prompt": prompt, "max_tokens": int(max_tokens),
                      "expect_token_ids": out[0, ids.shape[1]:].tolist()})
    print(json.dumps(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
