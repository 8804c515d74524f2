import { asRequestId, DEFAULT_TENANT } from '../src/core/index.js';
import { argmax, createEngine, loadModel } from '../src/model/index.js';
import { pagesFor } from '../src/pages/index.js';
const model = await loadModel('builtin:austen');
const dtype = process.argv[2] as 'f32' | 'f16';
const engine = await createEngine(model, { kvPages: 64, kvDtype: dtype, threads: 2 });
const { runner, pool } = engine;
const owner = { rid: asRequestId('x'), tenant: DEFAULT_TENANT };
const a = pool.ledger.allocate(pagesFor(500, 16), owner);
if (a.kind !== 'allocated') throw new Error();
const p = Array.from({ length: 300 }, (_, i) => 10 + (i * 37) % 4000);
let pos = 0; let last = 0;
while (pos < p.length) {
  const tokens = p.slice(pos, pos + 256);
  const [r] = await runner.step([{ ...owner, tags: a.tags, tokens, startPos: pos, wantLogits: pos + tokens.length === p.length }]);
  if (r!.kind === 'logits') last = argmax(r!.logits);
  pos += tokens.length;
}
const t = performance.now();
for (let s = 0; s < 150; s++) {
  const [r] = await runner.step([{ ...owner, tags: a.tags, tokens: [last], startPos: pos, wantLogits: true }]);
  if (r!.kind !== 'logits') throw new Error(r!.kind);
  last = argmax(r!.logits); pos++;
}
console.log(dtype, ((performance.now() - t) / 150).toFixed(2), 'ms per step');
await engine.dispose();
