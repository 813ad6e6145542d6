#!/usr/bin/env python3
"""Write a tiny, deterministic qwen3 demo model for smoke-testing vLLM.

The output directory receives everything `vllm ... --model DIR/demo-qwen3-F32.gguf
--tokenizer DIR` needs:

* ``demo-qwen3-F32.gguf`` (``--precision f16``: ``demo-qwen3-F16.gguf``) -- a dense
  qwen3 model with random weights (fixed seed), written with gguf's GGUFWriter,
  including the tokenizer in GGUF metadata;
* ``config.json`` / ``generation_config.json`` -- the matching Hugging Face config;
* ``tokenizer.json`` / ``tokenizer_config.json`` / ``special_tokens_map.json`` -- a
  byte-level BPE tokenizer trained on the spot from text embedded in this script.

The weights are noise, so the model talks gibberish; it exists to prove that a
deployment loads a GGUF, tokenizes, generates and answers the OpenAI API.
Running the script twice with the same arguments gives byte-identical files.

Dependencies: numpy, gguf==0.19.0, tokenizers.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

GGUF_FILE_TYPES = {
    "f32": gguf.LlamaFileType.ALL_F32,
    "f16": gguf.LlamaFileType.MOSTLY_F16,
}
TORCH_DTYPES = {"f32": "float32", "f16": "float16"}
MODEL_NAME = "vllm-fleet demo qwen3"

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Training text for the tokenizer. It is part of the script so that the
# vocabulary never depends on the Python version or on files of the host.
CORPUS_PARAGRAPHS = (
    "A fleet of inference servers is only as reliable as the way it is deployed. "
    "Each host receives the same packages, the same service unit and the same model "
    "files, and every change is rolled out one batch at a time. Before a host joins "
    "the pool it must answer a health check, list its models and complete a short "
    "prompt; only then does the load balancer send it traffic.",
    "The operator writes an inventory of hosts and groups, chooses a profile for each "
    "group, and runs the playbook. The playbook creates a virtual environment, "
    "installs the engine from a local wheelhouse, writes the configuration, starts "
    "the service and waits until it is ready. When something fails, the logs of the "
    "service tell why: a missing library, a full shared memory, a wrong path.",
    "Small models are useful for tests. They start in seconds, fit in little memory "
    "and let the whole path from request to response be checked without a graphics "
    "card. Their answers make no sense, and that is fine: the test asks whether the "
    "server speaks, not whether it is wise.",
    "Tokens are pieces of text. A byte-level tokenizer can encode any string, because "
    "every byte has a token of its own; frequent pairs of pieces are merged into "
    "longer tokens while the tokenizer is trained. The chat template wraps each "
    "message between a start marker and an end marker, and the model learns to stop "
    "when it writes the end marker.",
    "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday. January, "
    "February, March, April, May, June, July, August, September, October, November "
    "and December. Red, orange, yellow, green, blue, indigo and violet. North, south, "
    "east and west. Spring, summer, autumn and winter.",
    "def serve(model: str, port: int = 8000) -> None:\n"
    "    server = Server(model=model, port=port)\n"
    "    server.start()\n"
    "    while not server.ready():\n"
    "        time.sleep(1.0)\n"
    "    print(f\"ready on {port}\")\n",
    '{"model": "demo", "prompt": "Hello", "max_tokens": 32, "temperature": 0.0}\n'
    '{"role": "user", "content": "What is the capital of France?"}\n'
    '{"role": "assistant", "content": "Paris is the capital of France."}',
)

NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty "
    "sixty seventy eighty ninety hundred thousand million"
).split()


@dataclass(frozen=True)
class ModelShape:
    """Hyper-parameters shared by the GGUF metadata and config.json."""

    vocab_size: int
    hidden_size: int = 256
    num_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 512
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 4096


def build_corpus() -> list[str]:
    """Return the deterministic lines the tokenizer is trained on."""
    numbers = [f"{index} is {NUMBER_WORDS[index % len(NUMBER_WORDS)]}" for index in range(1000)]
    return [*CORPUS_PARAGRAPHS, *numbers]


def train_tokenizer(vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE tokenizer whose first ids are the special tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(build_corpus(), trainer=trainer)
    return tokenizer


def tokens_by_id(tokenizer: Tokenizer) -> list[str]:
    """Return the vocabulary as a list indexed by token id."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    tokens = [""] * len(vocab)
    for token, token_id in vocab.items():
        tokens[token_id] = token
    return tokens


def merges_as_strings(tokenizer: Tokenizer) -> list[str]:
    """Return the BPE merges in GGUF's "left right" form."""
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [" ".join(pair) if isinstance(pair, list) else pair for pair in merges]


def random_weights(shape: ModelShape, seed: int) -> dict[str, np.ndarray]:
    """Map GGUF tensor names to float32 arrays in Hugging Face (out, in) order.

    numpy's row-major (out, in) array becomes GGUF dims [in, out], which is the
    layout llama.cpp and vLLM's GGUF loader expect for linear weights.
    """
    rng = np.random.default_rng(seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=(rows, cols)).astype(np.float32)

    def ones(length: int) -> np.ndarray:
        return np.ones(length, dtype=np.float32)

    def name(tensor: gguf.MODEL_TENSOR, layer: int | None = None) -> str:
        return gguf.TENSOR_NAMES[tensor].format(bid=layer) + ".weight"

    hidden, heads, kv_heads, head_dim = (
        shape.hidden_size, shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim
    )
    tensor = gguf.MODEL_TENSOR
    weights = {name(tensor.TOKEN_EMBD): matrix(shape.vocab_size, hidden)}
    for layer in range(shape.num_layers):
        weights[name(tensor.ATTN_NORM, layer)] = ones(hidden)
        weights[name(tensor.ATTN_Q, layer)] = matrix(heads * head_dim, hidden)
        weights[name(tensor.ATTN_K, layer)] = matrix(kv_heads * head_dim, hidden)
        weights[name(tensor.ATTN_V, layer)] = matrix(kv_heads * head_dim, hidden)
        weights[name(tensor.ATTN_Q_NORM, layer)] = ones(head_dim)
        weights[name(tensor.ATTN_K_NORM, layer)] = ones(head_dim)
        weights[name(tensor.ATTN_OUT, layer)] = matrix(hidden, heads * head_dim)
        weights[name(tensor.FFN_NORM, layer)] = ones(hidden)
        weights[name(tensor.FFN_GATE, layer)] = matrix(shape.intermediate_size, hidden)
        weights[name(tensor.FFN_UP, layer)] = matrix(shape.intermediate_size, hidden)
        weights[name(tensor.FFN_DOWN, layer)] = matrix(hidden, shape.intermediate_size)
    weights[name(tensor.OUTPUT_NORM)] = ones(hidden)
    weights[name(tensor.OUTPUT)] = matrix(shape.vocab_size, hidden)
    return weights


def gguf_file_name(precision: str) -> str:
    """Return the model file name, e.g. demo-qwen3-F32.gguf."""
    return f"demo-qwen3-{precision.upper()}.gguf"


def add_model_metadata(writer: gguf.GGUFWriter, shape: ModelShape, precision: str) -> None:
    """Write the qwen3 hyper-parameters under the standard GGUF keys."""
    writer.add_name(MODEL_NAME)
    writer.add_file_type(GGUF_FILE_TYPES[precision])
    writer.add_context_length(shape.max_position_embeddings)
    writer.add_embedding_length(shape.hidden_size)
    writer.add_block_count(shape.num_layers)
    writer.add_feed_forward_length(shape.intermediate_size)
    writer.add_head_count(shape.num_attention_heads)
    writer.add_head_count_kv(shape.num_key_value_heads)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_theta)
    writer.add_layer_norm_rms_eps(shape.rms_norm_eps)


def add_tokenizer_metadata(writer: gguf.GGUFWriter, tokenizer: Tokenizer) -> None:
    """Write the tokenizer as a "gpt2" (byte-level BPE) GGUF vocabulary."""
    tokens = tokens_by_id(tokenizer)
    token_types = [
        gguf.TokenType.CONTROL if token in SPECIAL_TOKENS else gguf.TokenType.NORMAL
        for token in tokens
    ]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges(merges_as_strings(tokenizer))
    writer.add_bos_token_id(tokenizer.token_to_id(END_OF_TEXT))
    writer.add_eos_token_id(tokenizer.token_to_id(IM_END))
    writer.add_pad_token_id(tokenizer.token_to_id(END_OF_TEXT))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)


def write_gguf(
    path: Path, shape: ModelShape, tokenizer: Tokenizer, seed: int, precision: str
) -> None:
    """Write the model file: metadata, tokenizer and random tensors.

    With f16, matrices are stored as F16 and 1-D norm weights stay F32, as
    llama.cpp's converter does.
    """
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3])
    add_model_metadata(writer, shape, precision)
    add_tokenizer_metadata(writer, tokenizer)
    for tensor_name, array in random_weights(shape, seed).items():
        if precision == "f16" and array.ndim > 1:
            array = array.astype(np.float16)
        writer.add_tensor(tensor_name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def hf_config(shape: ModelShape, tokenizer: Tokenizer, precision: str) -> dict[str, object]:
    """Return a Qwen3ForCausalLM config.json matching the GGUF."""
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "vocab_size": shape.vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_key_value_heads,
        "head_dim": shape.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": shape.max_position_embeddings,
        "rms_norm_eps": shape.rms_norm_eps,
        "rope_theta": shape.rope_theta,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "torch_dtype": TORCH_DTYPES[precision],
        "bos_token_id": tokenizer.token_to_id(END_OF_TEXT),
        "eos_token_id": tokenizer.token_to_id(IM_END),
    }


def generation_config(tokenizer: Tokenizer) -> dict[str, object]:
    """Return generation defaults: stop on either end marker."""
    return {
        "bos_token_id": tokenizer.token_to_id(END_OF_TEXT),
        "eos_token_id": [tokenizer.token_to_id(IM_END), tokenizer.token_to_id(END_OF_TEXT)],
        "pad_token_id": tokenizer.token_to_id(END_OF_TEXT),
        "do_sample": False,
    }


def tokenizer_config(tokenizer: Tokenizer) -> dict[str, object]:
    """Return tokenizer_config.json for transformers' fast tokenizer."""
    added_tokens = {
        str(tokenizer.token_to_id(token)): {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for token in SPECIAL_TOKENS
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added_tokens,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": END_OF_TEXT,
        "unk_token": None,
        "add_bos_token": False,
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }


def special_tokens_map() -> dict[str, object]:
    """Return special_tokens_map.json."""
    return {
        "additional_special_tokens": [IM_START, IM_END],
        "eos_token": IM_END,
        "pad_token": END_OF_TEXT,
    }


def write_json(path: Path, content: dict[str, object]) -> None:
    """Write JSON with a stable layout."""
    path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--seed", type=int, default=1234, help="seed for the random weights")
    parser.add_argument("--vocab-size", type=int, default=2048, help="BPE vocabulary target")
    parser.add_argument("--layers", type=int, default=2, help="number of decoder layers")
    parser.add_argument(
        "--precision", choices=sorted(GGUF_FILE_TYPES), default="f32",
        help="storage type of the weight matrices (default f32)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    tokenizer = train_tokenizer(args.vocab_size)
    shape = ModelShape(vocab_size=tokenizer.get_vocab_size(), num_layers=args.layers)

    gguf_path = args.out / gguf_file_name(args.precision)
    write_gguf(gguf_path, shape, tokenizer, args.seed, args.precision)
    tokenizer.save(str(args.out / "tokenizer.json"))
    write_json(args.out / "config.json", hf_config(shape, tokenizer, args.precision))
    write_json(args.out / "generation_config.json", generation_config(tokenizer))
    write_json(args.out / "tokenizer_config.json", tokenizer_config(tokenizer))
    write_json(args.out / "special_tokens_map.json", special_tokens_map())
    print(f"wrote {args.out} (vocab {shape.vocab_size}, {shape.num_layers} layers)")


if __name__ == "__main__":
    main()
