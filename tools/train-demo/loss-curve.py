"""loss-curve.py: prints work/train-log.tsv as a markdown table (every held-out
evaluation) and an ASCII plot of the train loss, for the READMEs. It must never
change the log.

Usage (from the repository root): /usr/bin/python3 tools/train-demo/loss-curve.py
"""
import csv
import os

LOG = os.path.join("tools", "train-demo", "work", "train-log.tsv")
WIDTH, HEIGHT = 60, 14


def main():
    rows = list(csv.DictReader(open(LOG), delimiter="\t"))
    print("| step | tokens seen | wall (min) | lr | train loss (last 10 steps) | held-out loss |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if r["heldout_loss"] or r["step"] in ("10", "50"):
            print(f"| {r['step']} | {int(r['tokens']) / 1e6:.2f} M | {int(r['elapsed_s']) / 60:.1f} | {r['lr']} "
                  f"| {float(r['train_loss']):.3f} | {r['heldout_loss'] or ''} |")
    steps = [int(r["step"]) for r in rows]
    losses = [float(r["train_loss"]) for r in rows]
    held = {int(r["step"]): float(r["heldout_loss"]) for r in rows if r["heldout_loss"]}
    top, bottom = max(losses), min(losses + list(held.values()))
    grid = [[" "] * WIDTH for _ in range(HEIGHT)]
    def put(step, loss, ch):
        x = min(WIDTH - 1, round((step - steps[0]) / max(1, steps[-1] - steps[0]) * (WIDTH - 1)))
        y = min(HEIGHT - 1, round((top - loss) / (top - bottom) * (HEIGHT - 1)))
        grid[y][x] = ch
    for s, l in zip(steps, losses):
        put(s, l, ".")
    for s, l in held.items():
        put(s, l, "o")
    print("\n```")
    for i, line in enumerate(grid):
        label = top - (top - bottom) * i / (HEIGHT - 1)
        print(f"{label:5.2f} |{''.join(line)}")
    print(f"      +{'-' * WIDTH}")
    print(f"       step {steps[0]}{' ' * (WIDTH - 16)}step {steps[-1]}")
    print("       . train loss (mean of 10 steps)   o held-out loss")
    print("```")


if __name__ == "__main__":
    main()
