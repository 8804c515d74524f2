// tok.mjs: the one door through which the training tools reach a tokenizer, and it is
// the tokenizer Tessera runs: @lenml/tokenizers loading a Hugging Face tokenizer.json.
// It must never tokenize by any other means (no Python encoder), so that the ids the
// model was trained on and the ids Tessera feeds it are produced by the same code.
//
// As a module: loadTokenizer(dir) -> PreTrainedTokenizer.
// As a command (used by the Python exporter and sampler):
//   node tools/train-demo/tok.mjs <dir> encode   stdin: JSON string[]   stdout: JSON number[][] (BOS added)
//   node tools/train-demo/tok.mjs <dir> decode   stdin: JSON number[][] stdout: JSON string[]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TokenizerLoader } from '@lenml/tokenizers';

export function loadTokenizer(dir) {
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')),
    tokenizerConfig: JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')),
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [dir, op] = process.argv.slice(2);
  const tokenizer = loadTokenizer(dir);
  const input = JSON.parse(readFileSync(0, 'utf8'));
  let output;
  if (op === 'encode') output = input.map((text) => tokenizer.encode(text));
  else if (op === 'decode') output = input.map((ids) => (ids.length === 0 ? '' : tokenizer.decode(ids)));
  else throw new Error(`unknown op ${op}: expected encode or decode`);
  process.stdout.write(JSON.stringify(output));
}
