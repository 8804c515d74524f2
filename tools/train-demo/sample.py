"""sample.py: prints greedy and sampled continuations from the exported model (the f16
weights in models/austen/model.safetensors, run in f32 by model.py), for the model
card. It must never read training checkpoints: samples show what ships.

Sampling: temperature 0.8, top-k 40 (generation_config.json's defaults), torch
Generator seeded per sample, so the samples are reproducible on this torch build.

Usage (from the repository root):
  /usr/bin/python3 tools/train-demo/sample.py [model dir] [prompt] [num tokens]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import load_exported, logits_at_end, tok  # noqa: E402

SEEDS = [1, 2, 3]


@torch.no_grad()
def generate(model, prompt_ids, num_tokens, generator=None, temperature=0.8, top_k=40):
    ids = list(prompt_ids)
    for _ in range(num_tokens):
        window = ids[-model.cfg.max_position_embeddings:]
        logits = logits_at_end(model, window)
        if generator is None:
            ids.append(int(torch.argmax(logits)))
            continue
        values, indices = torch.topk(logits / temperature, top_k)
        choice = torch.multinomial(torch.softmax(values, dim=-1), 1, generator=generator)
        ids.append(int(indices[choice]))
    return ids[len(prompt_ids):]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("models", "austen")
    prompt = sys.argv[2] if len(sys.argv) > 2 else "It is a truth universally acknowledged"
    num_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    torch.set_num_threads(2)
    model = load_exported(out)
    [prompt_ids] = tok(out, "encode", [prompt])
    runs = [("greedy", generate(model, prompt_ids, num_tokens))]
    for seed in SEEDS:
        runs.append((f"sampled, T=0.8, top-k 40, seed {seed}",
                     generate(model, prompt_ids, num_tokens, torch.Generator().manual_seed(seed))))
    texts = tok(out, "decode", [ids for _, ids in runs])
    for (label, _), text in zip(runs, texts):
        quoted = "> " + (prompt + text).replace("\n", "\n> ")
        print(f"{label}:\n\n{quoted}\n")


if __name__ == "__main__":
    main()
