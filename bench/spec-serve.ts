// Speculation under load (issue 27): `tessera serve` at 16 streams with speculation off
// (--spec-max-draft 0), on by prompt lookup (the default) and, with --draft-model, by a draft
// model; output tokens/s per arm, rounds rotated so a drifting machine load hits every arm alike.
// Beyond SpecOptions.maxBatch (4) requests running or waiting (decodes and prompts in flight
// alike) no decode drafts, so the arms should match; this measures that they do. A benchmark: asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/spec-serve.ts --model /tmp/m100.gguf
//        [--draft-model SPEC] [--concurrency 16] [--rounds 3] [--input-len 64] [--output-len 32]
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { runLevel } from './lib/serve-load.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? (args[i + 1] as string) : fallback;
};
const MODEL = flag('--model', '/tmp/h2-m100.gguf');
const DRAFT = flag('--draft-model', '');
const CONCURRENCY = Number(flag('--concurrency', '16'));
const ROUNDS = Number(flag('--rounds', '3'));
const SHAPE = {
  inputLen: Number(flag('--input-len', '64')),
  outputLen: Number(flag('--output-len', '32')),
  promptsPerClient: 2,
  modelName: 'm',
};

async function startServer(extra: readonly string[]): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    ['bin/tessera.js', 'serve', '--model', MODEL, '--served-model-name', 'm', '--port', '0', ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`serve ${extra.join(' ')} exited (${code})`)));
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const found = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)?.[1];
      if (found !== undefined) resolve(found);
    });
  });
  return { url, stop };
}

const common = ['--max-running-requests', String(CONCURRENCY)];
const arms: [string, readonly string[]][] = [
  ['off', [...common, '--spec-max-draft', '0']],
  ['lookup', common],
  ...(DRAFT === '' ? [] : ([['draft', [...common, '--draft-model', DRAFT]]] as [string, readonly string[]][])),
];
const servers = await Promise.all(arms.map(([, extra]) => startServer(extra)));
console.log(
  `bench:spec-serve  model ${MODEL}  draft ${DRAFT || 'none'}  ${CONCURRENCY} streams  in ${SHAPE.inputLen} out ${SHAPE.outputLen}  ` +
    `rounds ${ROUNDS}  load ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
);
const tps: number[][] = arms.map(() => []);
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < arms.length; i++) {
    const a = (i + round) % arms.length;
    const level = await runLevel(servers[a]!.url, SHAPE, CONCURRENCY, round + 1);
    tps[a]!.push(level.outputThroughput);
    if (level.failed > 0) console.log(`${arms[a]![0]}: ${level.failed} failed (${level.firstError})`);
  }
}
const med = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number;
const off = med(tps[0]!);
for (let a = 0; a < arms.length; a++) {
  console.log(
    `${arms[a]![0].padEnd(7)} ${med(tps[a]!).toFixed(1)} output tok/s  ${(med(tps[a]!) / off).toFixed(2)}x off  ` +
      `[${tps[a]!.map((x) => x.toFixed(0)).join(' ')}]`,
  );
}
await Promise.all(servers.map((s) => s.stop()));
