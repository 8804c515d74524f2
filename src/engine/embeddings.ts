// Embedding requests (/v1/embeddings) in the step loop: an embedding request is a prompt with
// nothing to sample. Its last prompt chunk is planned with `hiddenOut` (plan.ts), the runner
// returns that chunk's last token's final hidden state (after the final norm) in place of
// logits, and this pass takes it before sampling: the request's result becomes `computed`, and
// the scheduler finishes it there (pages back, its full pages into the prefix cache).
// Pooling is the last token's state: with causal attention it is the only one that has seen the
// whole input (vLLM's default for a causal LM served as an embedder); the API L2-normalises it.
// Must never: hand one request another's row, or keep a view into the runner's buffers (the
// state is copied: the next step overwrites them).
import { InvariantError, type BatchItem, type RequestId } from '../core/index.js';
import type { ItemResult } from './runner.js';

export function takeHiddenStates(
  items: readonly BatchItem[],
  outputs: readonly ItemResult[],
  /** Where a request's hidden state goes (a copy); not called for a request that ended. */
  onHidden: (rid: RequestId, hidden: Float32Array) => void,
): ItemResult[] {
  return outputs.map((out, i): ItemResult => {
    const item = items[i];
    if (out.kind !== 'logits' || item?.hiddenOut !== true) return out;
    if (item.rid !== out.rid) throw new InvariantError(`hidden states: item ${item.rid} got ${out.rid}'s result`);
    onHidden(out.rid, out.logits.slice());
    return { kind: 'computed', rid: out.rid };
  });
}
