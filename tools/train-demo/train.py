"""train.py: trains model.py's Llama on the id streams encode-corpus.mjs wrote, with a
fixed seed and a fixed step count, logging to work/train-log.tsv and checkpointing to
work/ckpt.pt (resumable). It must never tokenize text itself: ids come only from the
JavaScript tokenizer Tessera runs (tok.mjs).

Each training window is [BOS] + stream[o : o + 511] (inputs) against stream[o : o + 512]
(targets), o uniform over the train stream: every window starts with BOS, as every
Tessera prompt does, and positions 0..511 are all trained (max_position_embeddings 512).
Held-out loss is the mean over non-overlapping 512-token windows of the held-out stream,
built the same way; "train (eval)" is the same measure on 86 fixed train windows.

Usage (from the repository root):
  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE nice -n 19 /usr/bin/python3 tools/train-demo/train.py [--resume]
(PASSIVE: on a shared machine, OpenMP threads that spin while waiting for a descheduled
partner burn the little CPU a nice-19 job gets.)
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Config, Llama  # noqa: E402

WORK = os.path.join("tools", "train-demo", "work")
SEED = 1811  # Sense and Sensibility
STEPS = 600
BATCH = 8
WINDOW = 512
PEAK_LR = 2e-3
MIN_LR = 2e-4
WARMUP = 30
WEIGHT_DECAY = 0.1
CLIP = 1.0
LOG_EVERY = 10
EVAL_EVERY = 100
EVAL_BATCH = 8
THREADS = 2


def lr_at(step: int) -> float:
    if step < WARMUP:
        return PEAK_LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, STEPS - WARMUP)
    return MIN_LR + 0.5 * (PEAK_LR - MIN_LR) * (1 + math.cos(math.pi * progress))


def load_ids(split: str) -> torch.Tensor:
    raw = np.fromfile(os.path.join(WORK, "ids", f"{split}.u16"), dtype="<u2")
    return torch.from_numpy(raw.astype(np.int64))


def windows(stream: torch.Tensor, offsets, bos: int):
    targets = torch.stack([stream[o : o + WINDOW] for o in offsets])
    inputs = torch.cat([torch.full((len(offsets), 1), bos), targets[:, :-1]], dim=1)
    return inputs, targets


@torch.no_grad()
def mean_loss(model, stream, offsets, bos) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(offsets), EVAL_BATCH):
        x, y = windows(stream, offsets[i : i + EVAL_BATCH], bos)
        logits = model(x)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    model.train()
    return total / count


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(THREADS)
    torch.manual_seed(SEED)

    cfg = Config()
    tokenizer_config = json.load(open(os.path.join(WORK, "tokenizer", "tokenizer_config.json")))
    vocab = json.load(open(os.path.join(WORK, "tokenizer", "tokenizer.json")))["model"]["vocab"]
    bos = vocab[tokenizer_config["bos_token"]]
    assert len(vocab) == cfg.vocab_size, (len(vocab), cfg.vocab_size)
    train_ids, heldout_ids = load_ids("train"), load_ids("heldout")
    heldout_offsets = list(range(0, len(heldout_ids) - WINDOW + 1, WINDOW))
    rng = np.random.Generator(np.random.PCG64(SEED))
    train_eval_offsets = sorted(rng.integers(0, len(train_ids) - WINDOW, size=len(heldout_offsets)).tolist())

    model = Llama(cfg)
    model.init_weights(torch.Generator().manual_seed(SEED))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
        lr=PEAK_LR, betas=(0.9, 0.95), eps=1e-8,
    )
    step, elapsed = 0, 0.0
    log_path = os.path.join(WORK, "train-log.tsv")
    ckpt_path = os.path.join(WORK, "ckpt.pt")
    if args.resume and os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        rng.bit_generator.state = ckpt["rng"]
        step, elapsed = ckpt["step"], ckpt["elapsed"]
        with open(log_path) as f:  # forget rows logged after the checkpoint: they are redone
            rows = [r for r in f if not r[0].isdigit() or int(r.split("\t")[0]) <= step]
        with open(log_path, "w") as f:
            f.writelines(rows)
        print(f"resumed at step {step}", flush=True)
    else:
        with open(log_path, "w") as f:
            f.write("step\telapsed_s\ttokens\tlr\ttrain_loss\theldout_loss\n")
    print(f"{model.num_parameters()} parameters; train {len(train_ids)} tokens, held-out {len(heldout_ids)}; "
          f"{STEPS} steps x {BATCH} x {WINDOW}", flush=True)

    started = time.time() - elapsed
    recent = []
    while step < STEPS:
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        offsets = rng.integers(0, len(train_ids) - WINDOW, size=BATCH).tolist()
        x, y = windows(train_ids, offsets, bos)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        recent.append(loss.item())
        step += 1
        heldout = ""
        if step % EVAL_EVERY == 0 or step == STEPS:
            heldout = f"{mean_loss(model, heldout_ids, heldout_offsets, bos):.4f}"
        if step % LOG_EVERY == 0 or heldout:
            elapsed = time.time() - started
            row = [step, f"{elapsed:.0f}", step * BATCH * WINDOW, f"{lr_at(step - 1):.2e}",
                   f"{sum(recent) / len(recent):.4f}", heldout]
            recent = []
            with open(log_path, "a") as f:
                f.write("\t".join(map(str, row)) + "\n")
            print("\t".join(map(str, row)), flush=True)
        if heldout:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                        "step": step, "elapsed": time.time() - started}, ckpt_path)

    final = {
        "steps": STEPS, "tokens": STEPS * BATCH * WINDOW, "wall_s": round(time.time() - started),
        "train_loss": mean_loss(model, train_ids, train_eval_offsets, bos),
        "heldout_loss": mean_loss(model, heldout_ids, heldout_offsets, bos),
        "parameters": model.num_parameters(), "seed": SEED, "batch": BATCH, "window": WINDOW,
        "peak_lr": PEAK_LR, "min_lr": MIN_LR, "warmup": WARMUP, "weight_decay": WEIGHT_DECAY,
        "threads": THREADS, "torch": torch.__version__,
    }
    torch.save(model.state_dict(), os.path.join(WORK, "final.pt"))
    with open(os.path.join(WORK, "final.json"), "w") as f:
        json.dump(final, f, indent=2)
    print(json.dumps(final), flush=True)


if __name__ == "__main__":
    main()
