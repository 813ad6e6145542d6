#!/usr/bin/env python3
"""Top-1 agreement of a served tiny GLM-5 GGUF with transformers' GlmMoeDsaForCausalLM.

  glm5_agreement.py generate --base-url URL --model NAME --ref REF_DIR --tokens 100 --out gen.json
                             [--top-logprobs K] [--prefill]
  glm5_agreement.py compare gen.json --ref REF_DIR --weights A.gguf [B.gguf ...] --label L --out cmp.json
  glm5_agreement.py compare gen-a.json gen-b.json ... --ref REF_DIR --weights A.gguf --out-dir DIR
                             [--floor-dtypes float16 bfloat16]
  glm5_agreement.py same gen-a.json gen-b.json --label L --out same.json [--field prefill_argmax]
  glm5_agreement.py prefill gen-a.json --base-url URL --model NAME --out xpf.json

generate: greedy (temperature 0, ignore_eos) from the reference prompts through the OpenAI API,
generated ids read back as token ids, with the server's top-K logprobs at each step. --prefill
then sends each whole sequence (prompt + generated) once more as a prompt with prompt_logprobs:
the server's own teacher-forced prediction at every generated position, computed by the prefill
path alone (no KV-cache decode), so prefill and decode numerics can be told apart.
compare: transformers (float32, CPU, eager) reads the whole generated sequence once (teacher
forcing) and its argmax at each generated position is compared with the token the server
produced there: the share that agree is the top-1 agreement. Also reported: the server's
logprob error at its own token, and each disagreeing position with transformers' margin there.
With several files the reference model is built once and one cmp-<name>.json is written per
file; --floor-dtypes also runs transformers itself in those dtypes (on CUDA when present) over
the same sequences: the agreement a correct implementation at that precision gets.
The weights are the GGUF's own, dequantized (glm5_gguf_to_hf.py), or the F32 reference shards.
Every sequence stays below index_topk, where DSA selects every token (== dense MLA), so missing
indexer weights get neutral fillers, as tests/fixtures/models/glm5_hf_reference.py does.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.load(resp)


def _token_id(key: str) -> int:
    """A logprobs key as a token id: "token_id:123" (return_tokens_as_token_ids) or "123"."""
    return int(str(key).rsplit(":", 1)[-1])


def prefill_rows(url: str, model: str, prompt_ids: list[int], ids: list[int], k: int) -> dict:
    """The whole sequence (prompt + ids) sent once as a prompt with prompt_logprobs: the server's
    teacher-forced top-k at each position of ids, from the prefill path alone."""
    body = {"model": model, "prompt": prompt_ids + ids, "max_tokens": 1, "temperature": 0.0,
            "prompt_logprobs": k, "return_tokens_as_token_ids": True}
    plp = post(url, body)["choices"][0].get("prompt_logprobs") or []
    n = len(prompt_ids)
    rows = []
    # prompt_logprobs[i] is the distribution that predicted token i, so position n + j
    # holds the prediction for generated token j (what decode step j produced)
    for step in plp[n: n + len(ids)]:
        rows.append({str(_token_id(t)): (v["logprob"] if isinstance(v, dict) else v)
                     for t, v in (step or {}).items()})
        best = min((v for v in (step or {}).values() if isinstance(v, dict) and "rank" in v),
                   key=lambda v: v["rank"], default=None)
        if best is not None and best.get("rank") != 1:
            rows[-1]["_argmax_missing"] = True
    argmax = [max(((int(t), v) for t, v in r.items() if not t.startswith("_")),
                  key=lambda tv: tv[1])[0] if r else None for r in rows]
    return {"prefill_top_logprobs": rows, "prefill_argmax": argmax}


def prefill(args: argparse.Namespace) -> None:
    """Another server's sequences (a generate output) teacher-forced through this server's prefill:
    both servers then predict every position from the same input, so a divergence early in the
    greedy decode cannot hide whether the rest agrees."""
    src = json.load(open(args.source))
    url = args.base_url.rstrip("/") + "/completions"
    out = {"model": args.model, "base_url": args.base_url, "source": src.get("base_url"), "sequences": []}
    for seq in src["sequences"]:
        row = {"prompt_ids": seq["prompt_ids"], "generated_ids": seq["generated_ids"]}
        row.update(prefill_rows(url, args.model, seq["prompt_ids"], seq["generated_ids"], max(1, args.top_logprobs)))
        out["sequences"].append(row)
    json.dump(out, open(args.out, "w"), indent=1)
    print(json.dumps({"model": args.model, "positions": sum(len(s["prefill_argmax"]) for s in out["sequences"]),
                      "prefill_argmax_equals_source_token": sum(int(p == g) for s in out["sequences"]
                                                                for p, g in zip(s["prefill_argmax"], s["generated_ids"]))}))


def generate(args: argparse.Namespace) -> None:
    ref = json.load(open(os.path.join(args.ref, "reference.json")))
    url = args.base_url.rstrip("/") + "/completions"
    k = max(1, args.top_logprobs)
    out = {"model": args.model, "base_url": args.base_url, "top_logprobs": k, "sequences": []}
    for case in ref["prompts"]:
        body = {"model": args.model, "prompt": case["prompt_ids"], "max_tokens": args.tokens,
                "temperature": 0.0, "ignore_eos": True, "logprobs": k, "return_tokens_as_token_ids": True}
        lp = post(url, body)["choices"][0]["logprobs"]
        ids = [_token_id(tok) for tok in lp["tokens"]]
        top = [{str(_token_id(t)): v for t, v in (step or {}).items()} for step in (lp.get("top_logprobs") or [])]
        ref_ids = case["greedy_ids"]
        same_prefix = next((i for i, (a, b) in enumerate(zip(ids, ref_ids)) if a != b), min(len(ids), len(ref_ids)))
        seq = {"prompt_ids": case["prompt_ids"], "generated_ids": ids, "token_logprobs": lp.get("token_logprobs"),
               "top_logprobs": top, "reference_greedy_prefix_match": same_prefix, "reference_len": len(ref_ids)}
        if args.prefill:
            seq.update(prefill_rows(url, args.model, case["prompt_ids"], ids, k))
        out["sequences"].append(seq)
    json.dump(out, open(args.out, "w"), indent=1)
    summary = {"model": args.model, "generated": sum(len(s["generated_ids"]) for s in out["sequences"]),
               "prefix_match_vs_reference_json": [s["reference_greedy_prefix_match"] for s in out["sequences"]]}
    if args.prefill:
        summary["prefill_argmax_equals_decode_token"] = sum(
            int(p == g) for s in out["sequences"] for p, g in zip(s["prefill_argmax"], s["generated_ids"]))
    print(json.dumps(summary))


def load_model(hf_dir: str, weights: list[str]):
    import numpy as np
    import torch
    from safetensors.torch import save_file
    from transformers import GlmMoeDsaForCausalLM

    from glm5_gguf_to_hf import hf_state, read_tensors

    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in hf_state(read_tensors(weights)).items()}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn.indexer."
        if p + "wk.weight" not in sd:
            ih, idim, hidden, ql = cfg["index_n_heads"], cfg["index_head_dim"], cfg["hidden_size"], cfg["q_lora_rank"]
            sd[p + "wq_b.weight"] = torch.zeros(ih * idim, ql)
            sd[p + "wk.weight"] = torch.zeros(idim, hidden)
            sd[p + "k_norm.weight"] = torch.ones(idim)
            sd[p + "k_norm.bias"] = torch.zeros(idim)
            sd[p + "weights_proj.weight"] = torch.zeros(ih, hidden)
    with tempfile.TemporaryDirectory() as tmp:
        json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"))
        save_file(sd, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
        model, info = GlmMoeDsaForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    missing = [k for k in info["missing_keys"] if "rotary" not in k]
    if missing or info["unexpected_keys"]:
        raise SystemExit(f"reference model: missing {missing}, unexpected {info['unexpected_keys']}")
    return model.eval()


# A reduced-precision server can only be held to transformers' top-1 where that choice is clear:
# bfloat16 keeps 8 significant bits (relative spacing 2^-7), so a top-1/top-2 logit margin below a few
# such steps of the logit's own size can flip through rounding alone.
RELATIVE_MARGINS = (2 ** -7, 2 ** -5, 2 ** -3)


def by_margin(margins: list[tuple[float, float, bool]]) -> list[dict]:
    """Agreement restricted to positions whose transformers top-1/top-2 margin exceeds
    rel * |top-1 logit|, for each rel in RELATIVE_MARGINS."""
    out = []
    for rel in RELATIVE_MARGINS:
        kept = [same for margin, top, same in margins if margin > rel * max(top, 1e-6)]
        out.append({"relative_margin": rel, "positions": len(kept), "agree": sum(kept),
                    "top1_agreement": round(sum(kept) / len(kept), 4) if kept else None})
    return out


def _floor_model(model, dtype_name: str):
    import copy

    import torch

    dtype = getattr(torch, dtype_name)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return copy.deepcopy(model).to(device=device, dtype=dtype).eval(), device


def _stats(values: list[float]) -> dict:
    if not values:
        return {}
    values = sorted(values)
    return {"mean": round(sum(values) / len(values), 5), "p50": round(values[len(values) // 2], 5),
            "p90": round(values[int(len(values) * 0.9)], 5), "max": round(values[-1], 5)}


def compare_one(model, gen: dict, label: str, weights: list[str], floors: dict) -> dict:
    """Agreement of one generate output with the float32 reference (and with each floor model)."""
    import torch

    agree = total = 0
    per_seq, margins, disagreements, lp_err, prefill_err = [], [], [], [], []
    prefill_agree = prefill_total = 0
    prefill_margins: list[tuple[float, float, bool]] = []
    floor_rows = {name: {"agree_with_fp32": 0, "agree_with_server": 0, "positions": 0, "margins": [],
                         "server_disagreements": 0, "floor_also_disagrees": 0, "floor_picks_server_token": 0}
                  for name in floors}
    for si, seq in enumerate(gen["sequences"]):
        prompt, ids = seq["prompt_ids"], seq["generated_ids"]
        full = torch.tensor([prompt + ids])
        logits = model(full).logits[0]
        steps = logits[len(prompt) - 1: len(prompt) - 1 + len(ids)]
        logp = torch.log_softmax(steps.double(), -1)
        predicted = steps.argmax(-1).tolist()
        top2 = steps.topk(2, dim=-1).values
        order = steps.argsort(-1, descending=True)
        server_lp = seq.get("token_logprobs") or [None] * len(ids)
        for j, ((l1, l2), a, b) in enumerate(zip(top2.tolist(), predicted, ids)):
            margins.append((l1 - l2, abs(l1), a == b))
            if server_lp[j] is not None:
                lp_err.append(abs(float(server_lp[j]) - float(logp[j, b])))
            if a != b:
                rank = int((order[j] == b).nonzero()[0, 0]) + 1
                disagreements.append({"seq": si, "pos": j, "server": b, "transformers": a, "server_rank": rank,
                                      "rel_margin": round((l1 - l2) / max(abs(l1), 1e-6), 5),
                                      "logp_gap": round(float(logp[j, a] - logp[j, b]), 5)})
        if "prefill_argmax" in seq:
            for j, (p, row) in enumerate(zip(seq["prefill_argmax"], seq["prefill_top_logprobs"])):
                if p is None:
                    continue
                prefill_total += 1
                prefill_agree += int(p == predicted[j])
                l1, l2 = top2[j].tolist()
                prefill_margins.append((l1 - l2, abs(l1), p == predicted[j]))
                tok = str(ids[j])
                if tok in row:
                    prefill_err.append(abs(float(row[tok]) - float(logp[j, ids[j]])))
        same = sum(int(a == b) for a, b in zip(predicted, ids))
        per_seq.append({"positions": len(ids), "agree": same})
        agree += same
        total += len(ids)
        for name, (fmodel, device) in floors.items():
            row = floor_rows[name]
            if "error" in row:
                continue
            try:
                flog = fmodel(full.to(device)).logits[0].float().cpu()
            except Exception as err:  # a floor is an extra: keep the rest
                row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
                continue
            fpred = flog[len(prompt) - 1: len(prompt) - 1 + len(ids)].argmax(-1).tolist()
            row["positions"] += len(ids)
            row["agree_with_fp32"] += sum(int(x == y) for x, y in zip(fpred, predicted))
            row["agree_with_server"] += sum(int(x == y) for x, y in zip(fpred, ids))
            # where the server left transformers' float32 top-1: did the floor model leave it too?
            wrong = [(x, y) for x, y, z in zip(fpred, ids, predicted) if y != z]
            row["server_disagreements"] += len(wrong)
            row["floor_also_disagrees"] += sum(int(x != z) for (x, _), z in
                                               zip(wrong, [z for y, z in zip(ids, predicted) if y != z]))
            row["floor_picks_server_token"] += sum(int(x == y) for x, y in wrong)
            row["margins"] += [(l1 - l2, abs(l1), x == y) for (l1, l2), x, y in zip(top2.tolist(), fpred, predicted)]
    result = {"label": label, "server_model": gen["model"], "base_url": gen.get("base_url"),
              "weights": [os.path.basename(w) for w in weights],
              "positions": total, "agree": agree, "top1_agreement": round(agree / total, 4), "per_sequence": per_seq,
              "by_margin": by_margin(margins),
              "server_logprob_abs_error_at_its_token": _stats(lp_err),
              "disagreements": disagreements}
    if prefill_total:
        result["prefill"] = {"positions": prefill_total, "agree": prefill_agree,
                             "top1_agreement": round(prefill_agree / prefill_total, 4),
                             "by_margin": by_margin(prefill_margins),
                             "server_logprob_abs_error_at_generated_token": _stats(prefill_err)}
    for name, row in floor_rows.items():
        n = row["positions"]
        result.setdefault("transformers_floors", {})[name] = {
            "positions": n, "agree_with_fp32": row["agree_with_fp32"],
            "top1_agreement_with_fp32": round(row["agree_with_fp32"] / n, 4) if n else None,
            "top1_agreement_with_server": round(row["agree_with_server"] / n, 4) if n else None,
            "at_server_disagreements": {k: row[k] for k in ("server_disagreements", "floor_also_disagrees",
                                                            "floor_picks_server_token")},
            "by_margin": by_margin(row["margins"]), **({"error": row["error"]} if "error" in row else {})}
    return result


def compare(args: argparse.Namespace) -> None:
    import torch

    torch.set_grad_enabled(False)
    model = load_model(os.path.join(args.ref, "hf"), args.weights)
    floors = {}
    for name in args.floor_dtypes or []:
        try:
            floors[name] = _floor_model(model, name)
        except Exception as err:  # a floor is an extra: report it and go on
            print(f"floor {name}: {type(err).__name__}: {err}", file=sys.stderr)
    many = len(args.generated) > 1 or args.out_dir
    if many and not args.out_dir:
        raise SystemExit("several generated files: give --out-dir")
    if not many and not args.out:
        raise SystemExit("give --out (or --out-dir)")
    for path in args.generated:
        name = os.path.basename(path).removesuffix(".json").removeprefix("gen-")
        label = args.label if (args.label and not many) else name
        try:
            result = compare_one(model, json.load(open(path)), label, args.weights, floors)
        except Exception as err:  # one broken file must not hide the others
            print(f"compare {path}: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            if not many:
                raise
            continue
        out = os.path.join(args.out_dir, f"cmp-{name}.json") if many else args.out
        json.dump(result, open(out, "w"), indent=1)
        short = {k: result[k] for k in ("label", "positions", "agree", "top1_agreement")}
        short["by_margin"] = [m["top1_agreement"] for m in result["by_margin"]]
        short["lp_err"] = result["server_logprob_abs_error_at_its_token"]
        if "prefill" in result:
            short["prefill"] = result["prefill"]["top1_agreement"]
        for fname, f in result.get("transformers_floors", {}).items():
            short[f"tf_{fname}"] = f["top1_agreement_with_fp32"]
        print(json.dumps(short) if many else json.dumps(result), flush=True)


def same(args: argparse.Namespace) -> None:
    """Greedy tokens of two servers on the same prompts: equal positions and the first divergence.
    With --field prefill_argmax: the teacher-forced predictions of two files over the same
    sequences (generate --prefill of one server, prefill of the other on that server's output)."""
    a, b = (json.load(open(path)) for path in (args.a, args.b))
    field = args.field
    rows, equal, total, gaps = [], 0, 0, []
    for sa, sb in zip(a["sequences"], b["sequences"]):
        if field != "generated_ids" and sa["generated_ids"] != sb["generated_ids"]:
            raise SystemExit(f"{field}: the two files do not hold the same sequences")
        x, y = sa[field], sb[field]
        first = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), None)
        eq = sum(int(p == q) for p, q in zip(x, y))
        rows.append({"positions": min(len(x), len(y)), "equal": eq, "first_divergence": first,
                     "differ_at": [i for i, (p, q) in enumerate(zip(x, y)) if p != q][:20]})
        equal += eq
        total += min(len(x), len(y))
        if field == "prefill_argmax":
            # logprob of a's argmax under both servers, where both report it
            for p, ra, rb in zip(x, sa["prefill_top_logprobs"], sb["prefill_top_logprobs"]):
                if p is not None and str(p) in ra and str(p) in rb:
                    gaps.append(abs(float(ra[str(p)]) - float(rb[str(p)])))
    result = {"label": args.label, "field": field, "a": a["model"] + " " + a["base_url"],
              "b": b["model"] + " " + b["base_url"],
              "positions": total, "equal": equal, "identical": equal == total, "per_sequence": rows}
    if gaps:
        result["logprob_abs_diff_at_a_argmax"] = _stats(gaps)
    json.dump(result, open(args.out, "w"), indent=1)
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--base-url", required=True)
    g.add_argument("--model", required=True)
    g.add_argument("--ref", required=True)
    g.add_argument("--tokens", type=int, default=100)
    g.add_argument("--out", required=True)
    g.add_argument("--top-logprobs", type=int, default=5)
    g.add_argument("--prefill", action="store_true", help="also the teacher-forced prefill prediction")
    c = sub.add_parser("compare")
    c.add_argument("generated", nargs="+")
    c.add_argument("--ref", required=True)
    c.add_argument("--weights", nargs="+", required=True)
    c.add_argument("--label")
    c.add_argument("--out")
    c.add_argument("--out-dir")
    c.add_argument("--floor-dtypes", nargs="*", default=[], help="also transformers in these dtypes")
    d = sub.add_parser("same")
    d.add_argument("a")
    d.add_argument("b")
    d.add_argument("--label", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--field", default="generated_ids", choices=["generated_ids", "prefill_argmax"])
    f = sub.add_parser("prefill")
    f.add_argument("source", help="a generate output (another server's sequences)")
    f.add_argument("--base-url", required=True)
    f.add_argument("--model", required=True)
    f.add_argument("--top-logprobs", type=int, default=5)
    f.add_argument("--out", required=True)
    args = ap.parse_args()
    {"generate": generate, "compare": compare, "same": same, "prefill": prefill}[args.cmd](args)


if __name__ == "__main__":
    main()
