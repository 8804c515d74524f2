// The router of `tessera up` tokenizes off its main thread too: while 128 chat prompts of 6 KB
// are templated and tokenized there, its /health (the relay's own thread) answers within
// HEALTH_MAX_MS; with `inline-tokenize` (the negative control, armed in every process of the
// cluster) the same burst holds it up longer. Measured on the 2-core machine at load average ~18
// (`TARGET=up npm run bench:tokenize`, 3 bursts each): threads /health max 42-110 ms; inline
// 525-2388 ms. test/e2e/serve-tokenize.test.ts checks the threads' ids against the inline path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenizeBurst } from '../support/tokenize-burst.js';
import { spawnTessera, testHome, type Proc } from './support.js';

const HEALTH_MAX_MS = 250;
const POOL = ['--context-length', '4096', '--kv-pages', '256'];

let home: Awaited<ReturnType<typeof testHome>>;
const clusters: Proc[] = [];
let threaded: string;
let inline: string;

function startUp(env: Record<string, string>): Promise<string> {
  const cluster = spawnTessera('up', ['up', '--port', '0', ...POOL], home.dir, env);
  clusters.push(cluster);
  return cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string);
}

beforeAll(async () => {
  home = await testHome();
  [threaded, inline] = await Promise.all([
    startUp({}),
    startUp({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'inline-tokenize' }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stop()));
  await home?.remove();
});

async function worstHealthMs(url: string): Promise<number> {
  let worst = 0;
  for (let round = 0; round < 2; round++)
    worst = Math.max(worst, (await tokenizeBurst(url, { numPrompts: 128, promptBytes: 6144 })).health.maxMs);
  return worst;
}

describe("tessera up's router tokenizes off its main thread", () => {
  it(`answers /health within ${HEALTH_MAX_MS} ms while 128 prompts of 6 KB are tokenized`, async () => {
    expect(await worstHealthMs(threaded)).toBeLessThan(HEALTH_MAX_MS);
  }, 60_000);

  it('(control) with inline-tokenize, the same burst holds /health up longer than that', async () => {
    expect(await worstHealthMs(inline)).toBeGreaterThanOrEqual(HEALTH_MAX_MS);
  }, 60_000);
});
