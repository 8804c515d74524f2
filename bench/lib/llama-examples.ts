// llama.cpp's own speculative decoding, from its example binaries built from the same bundled
// source as the cached llama-server (scripts/build-llama.mjs --examples DIR builds them under
// DIR, never into the shared cache): `llama-lookup` (prompt lookup: its n-gram cache over the
// context) and `llama-speculative-simple` (a draft model), each with and without drafting
// (`--spec-draft-n-max 0`: the same loop, one token a step). Benchmark code: runs a binary once
// per call on the caller's GGUF at the caller's threads, greedy, and reads what it prints
// ("decoded N tokens in S seconds, speed: X t/s", n_drafted, n_accept). Never measures Tessera.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const LLAMA_EXAMPLES = ['llama-lookup', 'llama-speculative-simple'] as const;

/** The directory holding the examples (BENCH_LLAMA_EXAMPLES, or /tmp/tessera-llama-examples/bin), or why not. */
export function llamaExamplesBin(): { bin: string } | { why: string } {
  const bin = process.env['BENCH_LLAMA_EXAMPLES'] ?? '/tmp/tessera-llama-examples/bin';
  const missing = LLAMA_EXAMPLES.filter((b) => !existsSync(join(bin, b)));
  return missing.length === 0
    ? { bin }
    : { why: `${missing.join(', ')} not in ${bin} (node scripts/build-llama.mjs --examples ${join(bin, '..')})` };
}

export interface LlamaExampleRun {
  readonly decodeTokensPerS: number;
  readonly drafted: number;
  readonly accepted: number;
  /** What it printed of the prompt and the answer (stdout): the arms' outputs compared. */
  readonly text: string;
}

/**
 * One greedy generation of `tokens` tokens after the prompt file's text: `llama-lookup` (draft
 * model undefined) or `llama-speculative-simple` (with it), drafting at most `maxDraft` a step (0: none).
 */
export async function runLlamaExample(
  bin: string,
  o: {
    model: string;
    draftModel?: string;
    promptFile: string;
    tokens: number;
    threads: number;
    maxDraft: number;
  },
): Promise<LlamaExampleRun> {
  const binary = join(bin, o.draftModel === undefined ? 'llama-lookup' : 'llama-speculative-simple');
  const args = [
    '-m',
    o.model,
    '-f',
    o.promptFile,
    '-n',
    String(o.tokens),
    '-t',
    String(o.threads),
    '-c',
    '2048',
    '--temp',
    '0',
    '--top-k',
    '1',
    '--ignore-eos',
    '--spec-draft-n-max',
    String(o.maxDraft),
    // (--spec-type: a draft GGUF without llama.cpp's speculative metadata enables nothing by itself.)
    ...(o.draftModel === undefined
      ? []
      : ['-md', o.draftModel, '--spec-type', 'draft-simple', '-td', String(o.threads), '--spec-draft-n-min', '0']),
  ];
  const { stdout, stderr } = await run(binary, args, { maxBuffer: 64 << 20, timeout: 600_000 });
  const decoded = /decoded\s+(\d+) tokens in\s+([\d.]+) seconds, speed:\s+([\d.]+) t\/s/.exec(stderr);
  if (decoded === null) throw new Error(`${binary}: no "decoded" line\n${stderr.slice(-800)}`);
  const count = (name: string) => Number(new RegExp(`${name}\\s*=\\s*(\\d+)`).exec(stderr)?.[1] ?? 0);
  return {
    decodeTokensPerS: Number(decoded[3]),
    drafted: count('n_drafted'),
    accepted: count('n_accept'),
    text: stdout,
  };
}
