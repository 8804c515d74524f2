// encode-corpus.mjs: encodes work/corpus.json with @lenml/tokenizers (through tok.mjs)
// into the id streams train.py reads, and proves on the way that the tokenizer
// round-trips every unit exactly. It must never write ids it has not checked.
//
// Output (work/ids/): train.u16 and heldout.u16, little-endian uint16 token ids. Each
// split is, book by book in publication order, encode(units of that split joined by
// "\n\n") followed by EOS. No BOS in the streams: train.py puts BOS at the start of
// every window it cuts, as Tessera puts BOS at the start of every prompt.
//
// Usage (from the repository root): node tools/train-demo/encode-corpus.mjs [tokenizer dir]
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadTokenizer } from './tok.mjs';

const WORK = join('tools', 'train-demo', 'work');
const dir = process.argv[2] ?? join(WORK, 'tokenizer');
const tokenizer = loadTokenizer(dir);
const eos = tokenizer.eos_token_id;
const { units } = JSON.parse(readFileSync(join(WORK, 'corpus.json'), 'utf8'));
mkdirSync(join(WORK, 'ids'), { recursive: true });

const started = Date.now();
// Recorded so the model card can show the shipped tokenizer.json is the one that made the ids.
const stats = {
  tokenizerJsonSha256: createHash('sha256')
    .update(readFileSync(join(dir, 'tokenizer.json')))
    .digest('hex'),
};
for (const split of ['train', 'heldout']) {
  const ids = [];
  let chars = 0;
  for (const book of [...new Set(units.map((u) => u.book))]) {
    const text = units
      .filter((u) => u.book === book && u.split === split)
      .map((u) => u.text)
      .join('\n\n');
    if (text === '') continue;
    const bookIds = tokenizer.encode(text, { add_special_tokens: false });
    const back = tokenizer.decode(bookIds);
    if (back !== text) throw new Error(`round trip failed in ${book}/${split}`);
    if (bookIds.some((id) => id >= tokenizer.bos_token_id)) throw new Error(`special id inside ${book}/${split}`);
    for (const id of bookIds) ids.push(id);
    ids.push(eos);
    chars += text.length;
  }
  writeFileSync(join(WORK, 'ids', `${split}.u16`), Buffer.from(Uint16Array.from(ids).buffer));
  stats[split] = { tokens: ids.length, chars, charsPerToken: +(chars / ids.length).toFixed(3) };
}
writeFileSync(join(WORK, 'ids', 'stats.json'), JSON.stringify(stats, null, 2) + '\n');
console.log(
  JSON.stringify(stats),
  `in ${((Date.now() - started) / 1000).toFixed(1)} s; every book round-trips exactly`,
);
