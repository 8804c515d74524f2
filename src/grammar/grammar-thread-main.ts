// A grammar thread (a worker_thread; grammar-thread.ts starts it). It owns one xgrammar WASM
// instance: the tokenizer info of the model's vocabulary, a compiler, and by role
//   checker: nothing kept; `check` compiles, asks the grammar's first mask (a schema that allows
//            no first token, like a $ref cycle with no value, is refused here, not sampled), drops it
//   matcher: a bounded cache of compiled grammars keyed by tenant and schema, and every matcher
// A WASM trap is answered `trapped` and this thread serves nothing more: the main thread ends it
// (unless a fault point keeps it). It must never reply for a request it was not sent.
import { parentPort, workerData } from 'node:worker_threads';
import { assert } from '../core/index.js';
import {
  GRAMMAR_CRASH_MARKER,
  isTrap,
  type GrammarSource,
  type GrammarThreadData,
  type GrammarThreadReply,
  type GrammarThreadRequest,
  type StepResult,
} from './grammar-messages.js';
import { compileSchema } from './schema-compile.js';
import { loadXgrammar } from './xgrammar.js';

const port = parentPort;
assert(port !== null, 'grammar-thread-main.ts runs as a worker thread');
const data = workerData as GrammarThreadData;
const xg = loadXgrammar();
const { pieces, vocabType, prependSpace, numLogits, stopTokenIds } = data.vocab;
const info = await xg.TokenizerInfo.createTokenizerInfo([...pieces], vocabType, prependSpace, numLogits, [
  ...stopTokenIds,
]);
const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);

type Compiled = Awaited<ReturnType<typeof compiler.compileJSONSchema>>;
type Matcher = Awaited<ReturnType<typeof xg.GrammarMatcher.createGrammarMatcher>>;
const cache = new Map<string, Compiled>();
const matchers = new Map<number, Matcher>();

function reply(message: GrammarThreadReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

/** anyWhitespace false, no indent, compact separators (a model cannot spin on spaces). */
function compile(source: GrammarSource): Promise<Compiled> {
  return compileSchema(xg, compiler, source.schema, source.strict); // splices schema-rules.ts's rules
}

async function compiledFor(key: string, source: GrammarSource): Promise<Compiled> {
  const hit = cache.get(key);
  if (hit !== undefined) {
    cache.delete(key);
    cache.set(key, hit); // most recently used last
    return hit;
  }
  const compiled = await compile(source);
  cache.set(key, compiled);
  while (cache.size > data.cacheSize) {
    const [oldest, evicted] = cache.entries().next().value as [string, Compiled];
    cache.delete(oldest);
    evicted.dispose(); // live matchers keep their own reference to the grammar
  }
  return compiled;
}

async function check(source: GrammarSource): Promise<number> {
  const started = performance.now();
  const compiled = await compile(source);
  const compileMs = performance.now() - started;
  const matcher = await xg.GrammarMatcher.createGrammarMatcher(compiled, [...stopTokenIds]);
  try {
    const mask = await matcher.getNextTokenBitmask();
    if (!mask.some((word) => word !== 0)) throw new RefusedError('the schema allows no JSON value at all');
  } finally {
    matcher.dispose();
    compiled.dispose();
  }
  return compileMs;
}

class RefusedError extends Error {}

/**
 * The matcher's next mask. xgrammar aborts (and its instance is then broken for everyone) when a
 * terminated matcher is asked for a mask: a complete output's mask allows the stop tokens only, built here.
 */
async function maskOf(matcher: Matcher): Promise<Int32Array> {
  return matcher.isTerminated() ? stopOnlyMask() : Int32Array.from(await matcher.getNextTokenBitmask());
}

function stopOnlyMask(): Int32Array {
  const mask = new Int32Array(Math.ceil(numLogits / 32));
  for (const id of stopTokenIds) mask[id >> 5] = (mask[id >> 5] as number) | (1 << (id & 31));
  return mask;
}

async function step(batch: Extract<GrammarThreadRequest, { kind: 'step' }>['batch']): Promise<void> {
  const results: StepResult[] = [];
  const transfer: ArrayBuffer[] = [];
  for (const { id, tokens, drafts } of batch) {
    const matcher = matchers.get(id);
    if (matcher === undefined) {
      results.push({ id, terminated: false, error: 'this structured output was lost (its grammar thread restarted)' });
      continue;
    }
    const refused = tokens.find((token) => !matcher.acceptToken(token));
    if (refused !== undefined) {
      results.push({ id, terminated: matcher.isTerminated(), error: `token ${refused} does not continue the grammar` });
      continue;
    }
    const terminated = matcher.isTerminated();
    const mask = await maskOf(matcher);
    transfer.push(mask.buffer as ArrayBuffer);
    if (drafts === undefined || drafts.length === 0) {
      results.push({ id, terminated, mask });
      continue;
    }
    // A speculative step: the mask each draft position is sampled under, as far as the grammar
    // accepts the drafts (row j after a refused draft is never reached: its draft was rejected by
    // the mask before it), then back to where the output really is.
    const draftMasks: Int32Array[] = [];
    for (const draft of drafts) {
      if (matcher.isTerminated() || !matcher.acceptToken(draft)) break;
      const next = await maskOf(matcher);
      transfer.push(next.buffer as ArrayBuffer);
      draftMasks.push(next);
    }
    if (draftMasks.length > 0 && !data.skipRollback) matcher.rollBack(draftMasks.length);
    results.push({ id, terminated, mask, draftMasks });
  }
  reply({ kind: 'stepped', results }, transfer);
}

let trapped = false;

async function handle(m: GrammarThreadRequest): Promise<void> {
  switch (m.kind) {
    case 'check':
      reply({ kind: 'checked', id: m.id, compileMs: await check(m.source) });
      return;
    case 'create': {
      if (data.crashOnMarker && m.source.schema.includes(GRAMMAR_CRASH_MARKER)) process.exit(70);
      const compiled = await compiledFor(m.key, m.source);
      matchers.set(m.id, await xg.GrammarMatcher.createGrammarMatcher(compiled, [...stopTokenIds]));
      reply({ kind: 'created', id: m.id });
      return;
    }
    case 'step':
      await step(m.batch);
      return;
    case 'dispose':
      for (const id of m.ids) {
        matchers.get(id)?.dispose();
        matchers.delete(id);
      }
      return;
  }
}

// One request at a time, in order: a step's masks never interleave with a compile.
let queue: Promise<void> = Promise.resolve();
port.on('message', (m: GrammarThreadRequest) => {
  queue = queue.then(async () => {
    const id = m.kind === 'check' || m.kind === 'create' ? m.id : null;
    try {
      await handle(m);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (m.kind === 'dispose')
        trapped ||= isTrap(error); // a dispose is never answered
      else if (trapped || isTrap(error)) {
        trapped = true;
        reply({ kind: 'trapped', id, message });
      } else if (id !== null) reply({ kind: 'refused', id, message });
      else reply({ kind: 'trapped', id, message: `unexpected: ${message}` });
    }
  });
});
reply({ kind: 'ready' });
