"""export.py: turns work/final.pt into the Hugging Face directory Tessera ships
(models/austen/): config.json, model.safetensors (f16, tied embeddings, no
lm_head.weight), tokenizer.json, tokenizer_config.json, generation_config.json, and
reference-logits.json. It must never compute reference numbers from anything but the
weights as written: it reads model.safetensors back, widens f16 to f32, and runs
model.py in f32 on that.

reference-logits.json (format "tessera-reference-logits/1"; see models/austen/README.md):
  cases[i].prompt_ids      the prompt as encode(prompt) gives it through tok.mjs (BOS first)
  cases[i].last_logits     f32 logits at the prompt's last position, all 4096 ids, one
                           forward over positions 0..n-1 (no cache)
  cases[i].greedy_ids      32 greedy tokens (argmax, lowest id on ties), each chosen by a
                           full forward over prompt + tokens so far
  cases[i].greedy_margins  top-1 minus top-2 logit at each greedy step

Usage (from the repository root): /usr/bin/python3 tools/train-demo/export.py [out dir] [state_dict file]
(defaults: models/austen, tools/train-demo/work/final.pt)
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
from model import Config, Llama  # noqa: E402

WORK = os.path.join("tools", "train-demo", "work")
GREEDY_TOKENS = 32
# Chosen (from ~30 candidates) so that every greedy step's top-1 / top-2 logit gap is at least
# 0.05, five times the logit tolerance: a faithful engine can never flip a greedy choice.
# They cover a quote-heavy prompt, a 4-token one, newlines, and a 117-token held-out passage.
PROMPTS = [
    ("dialogue", "\"Miss Bennet,\" replied Lady Catherine,"),
    ("short", "Mrs. Jennings"),
    ("chapter-heading", "CHAPTER I\n\n"),
    ("pride-and-prejudice-61-held-out",
     "Chapter 61\n\nHappy for all her maternal feelings was the day on which Mrs. Bennet got rid of her two "
     "most deserving daughters. With what delighted pride she afterwards visited Mrs. Bingley, and talked of "
     "Mrs. Darcy, may be guessed. I wish I could say, for the sake of her family, that the accomplishment of "
     "her earnest desire in the establishment of so many of her children produced so happy an effect as to "
     "make her a sensible, amiable, well-informed woman for the rest of her life;"),
]


def tok(directory: str, op: str, payload):
    """Encode (str[] -> int[][], BOS added) or decode through @lenml/tokenizers."""
    result = subprocess.run(["node", os.path.join(HERE, "tok.mjs"), directory, op],
                            input=json.dumps(payload), capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def hf_config(cfg: Config, bos: int, eos: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size, "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.head_dim, "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings, "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta, "rope_scaling": None, "attention_bias": False,
        "attention_dropout": 0.0, "mlp_bias": False, "tie_word_embeddings": True,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": None,
        "initializer_range": 0.02, "pretraining_tp": 1, "use_cache": True, "torch_dtype": "float16",
    }


def load_exported(out: str) -> Llama:
    """model.py in f32 holding exactly the f16 values in out/model.safetensors."""
    model = Llama(Config())
    tensors = safetensors_io.read(os.path.join(out, "model.safetensors"))
    state = {name: torch.from_numpy(array.astype(np.float32)) for name, array in tensors.items()}
    model.load_state_dict(state, strict=True)
    return model.eval()


@torch.no_grad()
def logits_at_end(model: Llama, ids) -> torch.Tensor:
    return model(torch.tensor([ids], dtype=torch.int64))[0, -1]


def greedy(model: Llama, prompt_ids):
    ids, margins = list(prompt_ids), []
    for _ in range(GREEDY_TOKENS):
        logits = logits_at_end(model, ids)
        top2 = torch.topk(logits, 2)
        ids.append(int(torch.argmax(logits)))  # torch.argmax returns the first maximum
        margins.append(float(top2.values[0] - top2.values[1]))
    return ids[len(prompt_ids):], margins


def f32_list(t: torch.Tensor):
    # Shortest decimal that reads back to the same f32; exact, and half the size of repr(double).
    return [float(np.format_float_positional(np.float32(v), unique=True, trim="-")) for v in t.tolist()]


def write_reference(out: str, model: Llama):
    prompt_ids = tok(out, "encode", [text for _, text in PROMPTS])
    cases = []
    for (name, text), ids in zip(PROMPTS, prompt_ids):
        logits = logits_at_end(model, ids)
        top = torch.topk(logits, 5)
        greedy_ids, margins = greedy(model, ids)
        cases.append({
            "name": name, "prompt": text, "prompt_ids": ids,
            "last_top5": [[int(i), round(float(v), 4)] for v, i in zip(top.values, top.indices)],
            "greedy_ids": greedy_ids, "greedy_text": tok(out, "decode", [greedy_ids])[0],
            "greedy_min_margin": round(min(margins), 4),
            "greedy_margins": [round(m, 4) for m in margins],
            "last_logits": f32_list(logits),
        })
    with open(os.path.join(out, "model.safetensors"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    doc = {
        "format": "tessera-reference-logits/1",
        "about": "For each case: prompt_ids (BOS first, as tokenizer.json encodes prompt), the f32 logits over "
                 "all vocab ids at the last prompt position (last_logits), and 32 greedy tokens (greedy_ids, "
                 "argmax with lowest id on ties, each from a full uncached forward). Computed by "
                 "tools/train-demo/export.py with model.py in float32 from model.safetensors' f16 values "
                 "widened to f32. A faithful implementation agrees within max |logit diff| <= 1e-2 and "
                 "reproduces greedy_ids exactly; greedy_margins (top-1 minus top-2 logit per step) show how "
                 "far each greedy choice is from a tie.",
        "model_safetensors_sha256": digest,
        "compute": {"framework": f"torch {torch.__version__}", "dtype": "float32",
                    "weights": "f16 from model.safetensors, widened to f32", "positions": "0..n-1, no KV cache"},
        "tolerance": {"max_abs_logit_diff": 1e-2, "greedy_tokens": GREEDY_TOKENS},
        "cases": cases,
    }
    # One field per line, arrays on one line: readable head, compact numbers.
    lines = ["{"]
    head = [k for k in doc if k != "cases"]
    for k in head:
        lines.append(f" {json.dumps(k)}: {json.dumps(doc[k])},")
    lines.append(' "cases": [')
    for i, case in enumerate(cases):
        fields = [f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in case.items()]
        lines.append("  {\n" + ",\n".join(fields) + "\n  }" + ("," if i + 1 < len(cases) else ""))
    lines.append(" ]")
    lines.append("}")
    with open(os.path.join(out, "reference-logits.json"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return cases


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("models", "austen")
    os.makedirs(out, exist_ok=True)
    cfg = Config()
    state = torch.load(sys.argv[2] if len(sys.argv) > 2 else os.path.join(WORK, "final.pt"))
    state = state.get("model", state)  # a training checkpoint (ckpt.pt) holds the weights under "model"
    assert "lm_head.weight" not in state, "tied embeddings: the checkpoint must not carry lm_head.weight"
    tensors = {name: t.detach().to(torch.float16).numpy() for name, t in state.items()}
    safetensors_io.write(os.path.join(out, "model.safetensors"), tensors, {"format": "pt"})
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(WORK, "tokenizer", name), os.path.join(out, name))
    vocab = json.load(open(os.path.join(out, "tokenizer.json")))["model"]["vocab"]
    tc = json.load(open(os.path.join(out, "tokenizer_config.json")))
    bos, eos = vocab[tc["bos_token"]], vocab[tc["eos_token"]]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_config(cfg, bos, eos), f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "do_sample": True, "temperature": 0.8,
                   "top_k": 40, "top_p": 1.0, "max_length": cfg.max_position_embeddings}, f, indent=2)
        f.write("\n")

    model = load_exported(out)
    original = Llama(cfg)
    original.load_state_dict(state)
    probe = torch.tensor([[bos] + list(range(10, 60))])
    with torch.no_grad():
        drift = (original.eval()(probe) - model(probe)).abs().max().item()
    cases = write_reference(out, model)
    for case in cases:
        print(f"{case['name']:22s} {len(case['prompt_ids']):4d} prompt ids, greedy min margin "
              f"{case['greedy_min_margin']:.4f}: {case['greedy_text']!r}")
    print(f"f32 -> f16 rounding moves logits by up to {drift:.4f} on a probe")
    for name in sorted(os.listdir(out)):
        print(f"{os.path.getsize(os.path.join(out, name)):>10d}  {name}")


if __name__ == "__main__":
    main()
