// train-tokenizer.mjs: trains a byte-level BPE vocabulary (GPT-2 style) on the train
// split of work/corpus.json and writes a Hugging Face tokenizer.json and
// tokenizer_config.json to work/tokenizer/. It must never see held-out text, and it
// never encodes the corpus for training: encode-corpus.mjs does that with the
// JavaScript tokenizer Tessera runs, so training ids and serving ids are one thing.
//
// The algorithm, in the order the output depends on it:
//   1. pre-tokenize with the GPT-2 regex (the literal that @lenml/tokenizers and HF's
//      ByteLevel pre-tokenizer use) and count each distinct piece;
//   2. spell each piece as UTF-8 bytes, each byte one symbol (ids 0..255 = byte value,
//      token text = GPT-2's byte-to-unicode character for that byte);
//   3. repeatedly merge the most frequent adjacent pair (ties: smaller left id, then
//      smaller right id) until the vocabulary has VOCAB_SIZE - specials entries;
//      pair counts are updated incrementally, only in the pieces a merge touches.
//
// Usage (from the repository root): node tools/train-demo/train-tokenizer.mjs
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const WORK = join('tools', 'train-demo', 'work');
const VOCAB_SIZE = 4096;
export const BOS = '<|begin_of_text|>';
export const EOS = '<|end_of_text|>';
const SPECIALS = [BOS, EOS]; // ids VOCAB_SIZE - 2 and VOCAB_SIZE - 1
// The GPT-2 pre-tokenizer, exactly as @lenml/tokenizers' ByteLevelPreTokenizer has it.
const PRETOKENIZE = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** GPT-2's reversible byte -> printable character map (no spaces, no controls). */
function bytesToUnicode() {
  const visible = [];
  for (let b = 0x21; b <= 0x7e; b++) visible.push(b);
  for (let b = 0xa1; b <= 0xac; b++) visible.push(b);
  for (let b = 0xae; b <= 0xff; b++) visible.push(b);
  const map = new Array(256);
  let next = 0;
  for (let b = 0; b < 256; b++) {
    map[b] = visible.includes(b) ? String.fromCodePoint(b) : String.fromCodePoint(256 + next++);
  }
  return map;
}

function countPieces(texts) {
  const counts = new Map();
  for (const text of texts) {
    for (const piece of text.match(PRETOKENIZE) ?? []) counts.set(piece, (counts.get(piece) ?? 0) + 1);
  }
  return counts;
}

const pairKey = (a, b) => a * 65536 + b;

function train(texts, numTokens) {
  const byteChar = bytesToUnicode();
  const encoder = new TextEncoder();
  const vocab = byteChar.slice(); // id -> token text
  const idOf = new Map(vocab.map((t, i) => [t, i]));
  const words = []; // symbol id arrays
  const freq = [];
  for (const [piece, n] of [...countPieces(texts)].sort((x, y) => (x[0] < y[0] ? -1 : 1))) {
    words.push(Array.from(encoder.encode(piece)));
    freq.push(n);
  }
  const pairCount = new Map();
  const pairWords = new Map(); // pair -> Set of word indices (may hold stale entries)
  const addPairs = (w, sign) => {
    const s = words[w];
    for (let i = 0; i + 1 < s.length; i++) {
      const k = pairKey(s[i], s[i + 1]);
      pairCount.set(k, (pairCount.get(k) ?? 0) + sign * freq[w]);
      if (sign > 0) {
        let set = pairWords.get(k);
        if (!set) pairWords.set(k, (set = new Set()));
        set.add(w);
      }
    }
  };
  for (let w = 0; w < words.length; w++) addPairs(w, 1);

  const merges = [];
  while (vocab.length < numTokens) {
    let best = -1;
    let bestCount = 0;
    for (const [k, c] of pairCount) {
      if (c > bestCount || (c === bestCount && c > 0 && k < best)) {
        best = k;
        bestCount = c;
      }
    }
    if (bestCount < 2) break; // nothing left worth merging
    const a = Math.floor(best / 65536);
    const b = best % 65536;
    const text = vocab[a] + vocab[b];
    let id = idOf.get(text);
    if (id === undefined) {
      id = vocab.length;
      vocab.push(text);
      idOf.set(text, id);
    }
    merges.push([vocab[a], vocab[b]]);
    for (const w of pairWords.get(best) ?? []) {
      addPairs(w, -1);
      const s = words[w];
      const out = [];
      for (let i = 0; i < s.length; i++) {
        if (i + 1 < s.length && s[i] === a && s[i + 1] === b) {
          out.push(id);
          i++;
        } else out.push(s[i]);
      }
      words[w] = out;
      addPairs(w, 1);
    }
    pairWords.delete(best);
    pairCount.delete(best);
  }
  return { vocab, merges };
}

function tokenizerJson(vocab, merges) {
  const specials = SPECIALS.map((content, i) => ({
    id: vocab.length + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const vocabObject = Object.fromEntries([...vocab, ...SPECIALS].map((t, i) => [t, i]));
  const bosId = specials[0].id;
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: specials,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ SpecialToken: { id: BOS, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
      pair: [
        { SpecialToken: { id: BOS, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: BOS, type_id: 1 } },
        { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: { [BOS]: { id: BOS, ids: [bosId], tokens: [BOS] } },
    },
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: vocabObject,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

function tokenizerConfig(vocab) {
  const decoder = Object.fromEntries(
    SPECIALS.map((content, i) => [
      String(vocab.length + i),
      {
        content,
        lstrip: false,
        normalized: false,
        rstrip: false,
        single_word: false,
        special: true,
      },
    ]),
  );
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    bos_token: BOS,
    eos_token: EOS,
    pad_token: null,
    unk_token: null,
    add_bos_token: true,
    add_eos_token: false,
    // Decoding must give back the exact text: never tidy spaces before punctuation.
    clean_up_tokenization_spaces: false,
    model_max_length: 512,
    added_tokens_decoder: decoder,
    // A prose model, not a chat model: messages become paragraphs, and the model is
    // asked to write the next paragraph.
    chat_template:
      "{{ bos_token }}{% for message in messages %}{% if not loop.first %}{{ '\\n\\n' }}{% endif %}" +
      "{{ message['content'] }}{% endfor %}{% if add_generation_prompt %}{{ '\\n\\n' }}{% endif %}",
  };
}

const { units } = JSON.parse(readFileSync(join(WORK, 'corpus.json'), 'utf8'));
const started = Date.now();
const { vocab, merges } = train(
  units.filter((u) => u.split === 'train').map((u) => u.text),
  VOCAB_SIZE - SPECIALS.length,
);
const out = join(WORK, 'tokenizer');
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'tokenizer.json'), JSON.stringify(tokenizerJson(vocab, merges), null, 1) + '\n');
writeFileSync(join(out, 'tokenizer_config.json'), JSON.stringify(tokenizerConfig(vocab), null, 2) + '\n');
console.log(
  `${vocab.length} + ${SPECIALS.length} tokens, ${merges.length} merges in ${((Date.now() - started) / 1000).toFixed(1)} s`,
);
console.log(
  'last merges:',
  merges
    .slice(-8)
    .map((m) => m.join('+'))
    .join(' '),
);
