// Disk-tier benchmark (`npm run bench:kv-disk`): multi-turn chats of 8 tenants whose working set
// is ~4x the KV pool, on m100, served by `tessera serve` twice in this one run: without a disk
// tier (an evicted history is recomputed) and with --kv-disk (it is loaded back from files).
// Turns go round-robin over the tenants, one request at a time, so between two turns of a chat
// the other chats push its pages out of the pool. Prints TTFT p50/p90 per arm (all turns, and
// returning turns only), the ratio, the disk tier's counters, and the first turn of each chat
// after a restart of the disk-tier server on the same directory. A benchmark: it asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/kv-disk.ts [--model /tmp/m100.gguf] [--tenants 8]
//        [--turns 4] [--system 480] [--user 48] [--reply 16] [--rounds 1]
// Make the model once: node bin/tessera.js gen-model --preset m100 --format gguf --dtype q4_0 --out /tmp/m100.gguf
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { asTenantId } from '../src/core/index.js';
import { PagePool, PrefixCache } from '../src/pages/index.js';
import { DiskTier } from '../src/worker/index.js';
import { promptIds, scrape, startServer, testHome, writeJson, type Server } from '../test/e2e/support/process.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const modelAt = args.indexOf('--model');
const MODEL = modelAt >= 0 ? (args[modelAt + 1] as string) : '/tmp/m100.gguf';
const TENANTS = flag('--tenants', 8);
const TURNS = flag('--turns', 4);
const SYSTEM = flag('--system', 480);
const USER = flag('--user', 48);
const REPLY = flag('--reply', 16);
const ROUNDS = flag('--rounds', 1);
const VOCAB = flag('--vocab', 4000); // token ids drawn from [3, 3 + VOCAB)
const PAGE = 16;
const ids = (n: number, first: number): number[] => promptIds(n, first).map((x) => 3 + ((x - 3) % VOCAB));
/** Every chat's last prompt, summed, over 4: the pool. */
const LAST_PROMPT = SYSTEM + TURNS * USER + (TURNS - 1) * REPLY;
const POOL_PAGES = Math.ceil((TENANTS * LAST_PROMPT) / 4 / PAGE);
const CONTEXT = Math.min(POOL_PAGES * PAGE, 2 ** Math.ceil(Math.log2(LAST_PROMPT + REPLY)));
const SERVE = ['--model', MODEL, '--context-length', String(CONTEXT), '--kv-pages', String(POOL_PAGES)];

/** The payload bytes of one page file in dir (its size less the header). */
async function diskBytesPerPage(dir: string): Promise<number | undefined> {
  const { readdir, stat } = await import('node:fs/promises');
  const name = (await readdir(dir)).find((n) => n.endsWith('.kvp'));
  if (name === undefined) return undefined;
  const size = (await stat(join(dir, name))).size;
  return Math.floor(size / 4096) * 4096; // the header (~150 bytes) is not a whole KiB; pages are
}

const quantile = (xs: readonly number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};

interface Chat {
  readonly tenant: number;
  history: number[];
}

interface Sample {
  readonly turn: number;
  readonly ttftMs: number;
}

/** One streamed greedy turn: TTFT, and the reply appended to the chat's history. */
async function turn(server: Server, chat: Chat, t: number): Promise<Sample> {
  chat.history = [...chat.history, ...ids(USER, 50_000 + chat.tenant * 131 + t * 7)];
  const started = performance.now();
  let ttftMs = Number.NaN;
  const reply: number[] = [];
  const body = {
    model: MODEL,
    prompt: chat.history,
    max_tokens: REPLY,
    temperature: 0,
    ignore_eos: true,
    stream: true,
    return_token_ids: true,
  };
  const stream = (await server
    .client(`sk-${chat.tenant}`)
    .completions.create(body as never)) as unknown as AsyncIterable<{
    choices: { token_ids?: number[] }[];
  }>;
  for await (const chunk of stream) {
    if (Number.isNaN(ttftMs)) ttftMs = performance.now() - started;
    reply.push(...(chunk.choices[0]?.token_ids ?? []));
  }
  chat.history = [...chat.history, ...reply];
  return { turn: t, ttftMs };
}

const freshChats = (): Chat[] =>
  Array.from({ length: TENANTS }, (_, tenant) => ({ tenant, history: ids(SYSTEM, 10_000 + tenant * 997) }));

async function runChats(server: Server, chats: Chat[], turns: number, firstTurn = 0): Promise<Sample[]> {
  const samples: Sample[] = [];
  for (let t = firstTurn; t < firstTurn + turns; t++)
    for (const chat of chats) samples.push(await turn(server, chat, t));
  return samples;
}

async function diskCounters(server: Server): Promise<string> {
  const m = await scrape(server.url);
  const g = (name: string): number => m.get(name) ?? Number.NaN;
  const refused = [...m].filter(([k]) => k.startsWith('tessera_kv_disk_refused_loads')).reduce((s, [, v]) => s + v, 0);
  return (
    `spilled ${g('tessera_kv_disk_pages_spilled')} pages, loaded ${g('tessera_kv_disk_pages_loaded')}, ` +
    `misses ${g('tessera_kv_disk_misses')}, refused ${refused}, on disk ${g('tessera_kv_disk_pages')} pages ` +
    `(${(g('tessera_kv_disk_bytes') / 2 ** 20).toFixed(1)} MiB)`
  );
}

const line = (name: string, s: readonly Sample[]): string => {
  const back = s.filter((x) => x.turn > 0).map((x) => x.ttftMs);
  const all = s.map((x) => x.ttftMs);
  return (
    `${name.padEnd(8)} TTFT p50 ${quantile(all, 0.5).toFixed(0)} ms, p90 ${quantile(all, 0.9).toFixed(0)} ms; ` +
    `returning turns p50 ${quantile(back, 0.5).toFixed(0)} ms (${s.length} requests)`
  );
};

/** What one disk hit costs per page of `pageBytes` (file read, checks, xxh64, allocation, copy into the pool, stamp), warm. */
async function loadMsPerPage(dir: string, pageBytes: number): Promise<number> {
  const numPages = 64;
  const headDim = pageBytes / (PAGE * 2 * 4);
  const pool = PagePool.create({ numPages: 2 * numPages, pageSize: PAGE, numLayers: 1, numKvHeads: 1, headDim });
  const tier = DiskTier.open({ dir, maxBytes: 2 ** 40, log: () => undefined });
  const cache = new PrefixCache({ pool, spill: { store: tier, model: 'bench' } });
  const who = { rid: 'r0', tenant: asTenantId('t') } as never;
  const tokens = ids(numPages * PAGE + 1, 7);
  const got = cache.allocate(numPages, who);
  if (got.kind !== 'allocated') throw new Error('pool');
  for (const tag of got.tags) pool.stamp(tag, PAGE);
  cache.insert(who, tokens, got.tags);
  cache.evict(numPages);
  await tier.flush();
  // The first pass warms up (JIT, the read buffer, the OS page cache): the best of 5 is the steady cost.
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < 5; pass++) {
    const reader = { rid: `r${pass + 1}`, tenant: asTenantId('t') } as never;
    const started = performance.now();
    const hit = cache.match(reader, tokens.slice(0, -1));
    best = Math.min(best, (performance.now() - started) / hit.tags.length);
    pool.ledger.relinquish(hit.tags, reader);
    cache.evict(numPages);
  }
  return best;
}

async function main(): Promise<void> {
  if (!existsSync(MODEL) && !MODEL.startsWith('builtin:')) {
    throw new Error(
      `${MODEL} is missing: node bin/tessera.js gen-model --preset m100 --format gguf --dtype q4_0 --out ${MODEL}`,
    );
  }
  const home = await testHome();
  try {
    const keys = await writeJson(
      home.dir,
      'keys.json',
      Object.fromEntries(Array.from({ length: TENANTS }, (_, t) => [`sk-${t}`, `tenant-${t}`])),
    );
    process.stdout.write(
      `bench:kv-disk  ${TENANTS} tenants x ${TURNS} turns, round-robin; system ${SYSTEM}, user ${USER}, reply ${REPLY} ` +
        `tokens; last prompt ${LAST_PROMPT} tokens; pool ${POOL_PAGES} pages of ${PAGE} (working set ` +
        `${((TENANTS * LAST_PROMPT) / (POOL_PAGES * PAGE)).toFixed(1)}x); ${MODEL}\n`,
    );
    const none: Sample[] = [];
    const disk: Sample[] = [];
    let diskDir = '';
    let chatsAfter: Chat[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const arm of round % 2 === 0 ? ['none', 'disk'] : ['disk', 'none']) {
        diskDir = join(home.dir, `kv-disk-${round}`);
        await mkdir(diskDir, { recursive: true });
        const server = await startServer(
          ['--api-keys', keys, ...SERVE, ...(arm === 'disk' ? ['--kv-disk', diskDir] : [])],
          home.dir,
          {},
          300_000,
        );
        try {
          const chats = freshChats();
          const samples = await runChats(server, chats, TURNS);
          (arm === 'disk' ? disk : none).push(...samples);
          process.stdout.write(`${line(`${arm}#${round}`, samples)}\n`);
          if (arm === 'disk') {
            process.stdout.write(`         disk tier: ${await diskCounters(server)}\n`);
            chatsAfter = chats;
          }
        } finally {
          await server.stop();
        }
      }
    }
    const p50 = (s: Sample[], back: boolean): number =>
      quantile(
        s.filter((x) => !back || x.turn > 0).map((x) => x.ttftMs),
        0.5,
      );
    process.stdout.write(`${line('none', none)}\n${line('disk', disk)}\n`);
    process.stdout.write(
      `ratio disk/none TTFT p50: ${(p50(disk, false) / p50(none, false)).toFixed(3)} (all turns), ` +
        `${(p50(disk, true) / p50(none, true)).toFixed(3)} (returning turns); target <= 0.333\n`,
    );
    const pageBytes = (await diskBytesPerPage(diskDir)) ?? 0;
    const loadMs = await loadMsPerPage(join(home.dir, 'load-cost'), pageBytes);
    const recomputeMs = (p50(none, true) / (SYSTEM + (TURNS / 2) * (USER + REPLY))) * PAGE;
    process.stdout.write(
      `one page (${(pageBytes / 1024).toFixed(0)} KiB) from disk: ${loadMs.toFixed(2)} ms; recomputing it: ~${recomputeMs.toFixed(1)} ms ` +
        `(none's returning-turn p50 per prompt token x ${PAGE})\n`,
    );
    // A restart on the last disk directory: each chat's next turn.
    const server = await startServer(['--api-keys', keys, ...SERVE, '--kv-disk', diskDir], home.dir, {}, 300_000);
    try {
      const samples = await runChats(server, chatsAfter, 1, TURNS);
      process.stdout.write(
        `after a restart: next turn of each chat TTFT p50 ${p50(samples, true).toFixed(0)} ms; ${await diskCounters(server)}\n`,
      );
    } finally {
      await server.stop();
    }
  } finally {
    await home.remove();
  }
}

await main();
