// Speculative decoding by prompt lookup (issue 27): batch-1 decode tokens/s with speculation on
// and off, on the serving path (scheduler + engine loop + ModelRunner, fast kernels, this thread),
// rounds interleaved (on, off, off, on, ...) so a drifting machine load hits both arms alike.
// Workloads, greedy, one request at a time:
//   quote   repetitive work: the prompt holds a text and asks for it again (prompt: T, then T's
//           first tokens): what prompt lookup is for. With a random-weight model the text is the
//           model's own greedy continuation G of a seed prompt S (prompt: S G S), the one text it
//           is likely to produce again; a trained model (--model builtin:austen) quotes real text.
//   free    free generation from a short prompt (no text to copy: drafts only when the output
//           repeats itself, as random models' greedy outputs do).
// Prints per workload tok/s on/off, the ratio, and the acceptance rate; asserts nothing.
// With --draft-model SPEC (a model of the same vocabulary; `--draft-layers n` writes the --model
// directory's first n layers as one, a self-speculative draft: bench/lib/first-layers.ts) a third
// arm drafts with it (engine/draft-model.ts), in the same interleaved rounds.
//
//   node --import ./bench/lib/register-ts.mjs bench/spec.ts [--model /tmp/h2-m100.gguf] [--tokens 64]
//        [--rounds 3] [--max-draft 4] [--threads N] [--draft-model SPEC | --draft-layers N] [--only free,text]
//        [--llama] [--probe-window N] [--draft-vocab N [--draft-vocab-calib C]]
// --draft-vocab N adds a fourth arm, draft-fr: the same draft model with its output head cut to N
// frequency-ranked tokens (FR-Spec; engine/draft-head.ts), in the same rounds.
// --llama (GGUF models): llama.cpp's own speculative decoding on the same files at the same
// threads, in the same rounds, from its example binaries built from the same bundled source
// (bench/lib/llama-examples.ts; `node scripts/build-llama.mjs --examples DIR`): plain
// (llama-lookup drafting nothing), its prompt lookup (llama-lookup) and, with a GGUF
// --draft-model, its draft model (llama-speculative-simple); decode tok/s as each prints it. The
// prompt is the workload's ids as text (Tessera's detokenizer), which llama.cpp tokenizes again:
// about the same tokens. (llama-server answered 500 on m100's random bytes under
// --spec-type ngram-simple: its chat-format parser; the examples have none.)
import { availableParallelism, loadavg } from 'node:os';
import { asRequestId, DEFAULT_TENANT, NO_FAULTS, samplingParams, type RequestId } from '../src/core/index.js';
import {
  createEngine,
  rankTokens,
  restrictHead,
  Sampler,
  type Engine,
  type ModelWeights,
} from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';
import { DEFAULT_SPEC, type SpecOptions } from '../src/scheduler/index.js';
import { DraftModel } from '../src/engine/draft-model.js';
import { EngineLoop } from '../src/engine/engine-loop.js';
import { writeFirstLayers } from './lib/first-layers.js';
import { writeFileSync } from 'node:fs';
import { llamaExamplesBin, runLlamaExample } from './lib/llama-examples.js';
import { schedulerFor } from '../src/worker/scheduler-for.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? (args[i + 1] as string) : fallback;
};
const MODEL = flag('--model', '/tmp/h2-m100.gguf');
const TOKENS = Number(flag('--tokens', '64'));
const ROUNDS = Number(flag('--rounds', '3'));
const THREADS = Number(flag('--threads', String(availableParallelism())));
const SPEC: SpecOptions = { ...DEFAULT_SPEC, maxDraft: Number(flag('--max-draft', String(DEFAULT_SPEC.maxDraft))) };
const DRAFT_LAYERS = flag('--draft-layers', '');
const DRAFT_MODEL =
  DRAFT_LAYERS !== ''
    ? await writeFirstLayers(MODEL, `/tmp/bench-spec-draft-${DRAFT_LAYERS}`, Number(DRAFT_LAYERS))
    : flag('--draft-model', '');
const ONLY = flag('--only', '');
/**
 * --draft-vocab N: the draft model's head restricted to N tokens (FR-Spec; engine/draft-head.ts),
 * ranked by how often the target's greedy outputs held them over --draft-vocab-calib prompts
 * unlike the workloads' (default 4; 0: by id alone), the rest by id.
 */
const DRAFT_VOCAB = Number(flag('--draft-vocab', '0'));
/** --text-tokens N: the length of the model's own greedy text G the quote and repeat prompts hold (default 160). */
const TEXT_TOKENS = Number(flag('--text-tokens', '160'));
const DRAFT_VOCAB_CALIB = Number(flag('--draft-vocab-calib', '4'));
/** The draft model's catch-up window while unproven (engine/draft-model.ts; a huge one: the whole prompt, as before). */
const PROBE_WINDOW = flag('--probe-window', '');
/** The arms: plain decoding, prompt lookup, a draft model; llama.cpp's (its example binaries) likewise. */
type Arm = 'off' | 'lookup' | 'draft' | 'draft-fr' | 'llama' | 'llama-lookup' | 'llama-draft';
type OwnArm = 'off' | 'lookup' | DraftArm;
/** The draft model with its whole head, and (--draft-vocab) with its restricted head. */
type DraftArm = 'draft' | 'draft-fr';
const isDraft = (a: Arm): a is DraftArm => a === 'draft' || a === 'draft-fr';
/** A draft arm's engine, and the tokens of its restricted head (draft-fr). */
interface DraftSetup {
  readonly engine: Engine;
  readonly headTokens?: Int32Array;
}

/** A llama.cpp arm's failed request: reported, its tok/s NaN (the others still compare). */
function failedRun(arm: Arm, error: unknown): Outcome {
  console.log(`  ${arm}: ${error instanceof Error ? error.message : String(error)}`);
  return { ids: [], decodeTokensPerS: Number.NaN, drafted: 0, accepted: 0 };
}

interface Outcome {
  readonly ids: number[];
  readonly decodeTokensPerS: number;
  readonly drafted: number;
  readonly accepted: number;
}

let seq = 0;
const sharedDrafters = new Map<DraftArm, DraftModel>();
/** A draft arm's time in the draft model's passes (its prepare()) and in decoding, this workload: what drafting costs, load aside. */
const draftTimes = new Map<DraftArm, { draftMs: number; decodeMs: number }>();
/** One greedy request through a fresh scheduler and engine loop on the engine's pool. */
async function run(
  engine: Engine,
  prompt: readonly number[],
  maxTokens: number,
  arm: OwnArm,
  draftSetup?: DraftSetup,
): Promise<Outcome> {
  const spec = arm !== 'off';
  // One draft model for the whole run, as a server has: what it learnt of its cost and acceptance stays.
  if (isDraft(arm) && draftSetup !== undefined && !sharedDrafters.has(arm)) {
    const made = new DraftModel({
      runner: draftSetup.engine.runner,
      maxBatch: SPEC.maxBatch,
      faults: NO_FAULTS,
      ...(PROBE_WINDOW === '' ? {} : { probeWindow: Number(PROBE_WINDOW) }),
      ...(draftSetup.headTokens === undefined ? {} : { headTokens: draftSetup.headTokens }),
    });
    const prepare = made.prepare.bind(made);
    made.prepare = async (scheduler, now) => {
      const started = performance.now();
      await prepare(scheduler, now);
      draftTimeOf(arm).draftMs += performance.now() - started;
    };
    sharedDrafters.set(arm, made);
  }
  const drafter = isDraft(arm) ? sharedDrafters.get(arm) : undefined;
  const pool = engine.pool;
  const scheduler = schedulerFor('colocated', {
    pool,
    contextLength: Math.min(engine.runner.maxPositions, 4096),
    maxRunningRequests: 4,
    chunkedPrefillSize: 256,
    maxWaiting: 4,
    faults: NO_FAULTS,
    eosTokenIds: [],
    ...(spec ? { speculation: isDraft(arm) ? { ...SPEC, drafter: 'model' as const } : SPEC } : {}),
  });
  const rid: RequestId = asRequestId(`bench-${seq++}`);
  const sampling = samplingParams({ maxTokens, temperature: 0, ignoreEos: true });
  const ids: number[] = [];
  let firstAt = 0;
  let endAt = 0;
  let ended!: () => void;
  const done = new Promise<void>((resolve) => (ended = resolve));
  const loop = new EngineLoop({
    scheduler,
    runner: engine.runner,
    sampler: new Sampler(engine.config.vocabSize),
    samplingOf: (r) => {
      const view = scheduler.view(r);
      return view === undefined
        ? undefined
        : { params: sampling, numOutputTokens: view.numOutputTokens, outputTokens: () => scheduler.outputTokens(r) };
    },
    onEvents: (events) => {
      for (const e of events) {
        if (e.kind === 'token') {
          if (ids.length === 0) firstAt = performance.now();
          ids.push(e.token);
        }
        if (e.kind === 'failed') throw e.error;
        if (e.kind === 'finished') {
          endAt = performance.now();
          ended();
        }
      }
    },
    onFatal: (error) => {
      throw error;
    },
    faults: NO_FAULTS,
    checkEveryStep: false,
    maxStepMs: 'off',
    pool,
    ...(drafter === undefined ? {} : { drafter }),
  });
  scheduler.admit({ rid, tenant: DEFAULT_TENANT, promptTokens: prompt, sampling });
  loop.start();
  await done;
  await loop.close();
  drafter?.sweep(scheduler); // its pages back to the draft pool for the next run
  // (Its prefix cache keeps its pages cached in the pool: each run has a fresh scheduler, so no hits.)
  const { numDrafted, numAccepted } = scheduler.specStats;
  if (isDraft(arm)) draftTimeOf(arm).decodeMs += endAt - firstAt;
  return {
    ids,
    decodeTokensPerS: (ids.length - 1) / ((endAt - firstAt) / 1000),
    drafted: numDrafted,
    accepted: numAccepted,
  };
}

function draftTimeOf(arm: DraftArm): { draftMs: number; decodeMs: number } {
  let t = draftTimes.get(arm);
  if (t === undefined) draftTimes.set(arm, (t = { draftMs: 0, decodeMs: 0 }));
  return t;
}

/** A public-domain paragraph (Pride and Prejudice, ch. 1) for --text: quoted back by a trained model. */
const QUOTE =
  'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife. ' +
  'However little known the feelings or views of such a man may be on his first entering a neighbourhood, this truth is so ' +
  'well fixed in the minds of the surrounding families, that he is considered the rightful property of some one or other of their daughters.';

/** The smallest period p <= 32 with which the last 64 tokens repeat, if any. */
function periodOf(ids: readonly number[]): number | undefined {
  const tail = ids.slice(-64);
  for (let p = 1; p <= 32; p++) if (tail.every((t, i) => i < p || t === tail[i - p])) return p;
  return undefined;
}

async function main(): Promise<void> {
  const model = await loadModel(MODEL, {});
  const engine = await createEngine(model, { kvPages: 2048, pageSize: 16, threads: THREADS, maxStepLogits: 64 });
  const vocab = model.config.vocabSize;
  const seedPrompt = Array.from({ length: 48 }, (_, i) => 300 + ((i * 7919) % Math.max(1, vocab - 400)));
  // The text to quote: the model's own greedy continuation of the seed prompt.
  const text = (await run(engine, seedPrompt, TEXT_TOKENS, 'off')).ids;
  const draftWeights: ModelWeights | undefined = DRAFT_MODEL === '' ? undefined : await loadModel(DRAFT_MODEL, {});
  const draftEngineOf = (weights: ModelWeights) =>
    createEngine(weights, { kvPages: 2048, pageSize: 16, threads: THREADS, maxStepLogits: SPEC.maxBatch });
  const draftSetups = new Map<DraftArm, DraftSetup>();
  if (draftWeights !== undefined) draftSetups.set('draft', { engine: await draftEngineOf(draftWeights) });
  if (draftWeights !== undefined && DRAFT_VOCAB > 0) {
    // Calibration: the target's own greedy outputs from prompts of another pattern than the workloads'.
    const counts = new Map<number, number>();
    for (let c = 0; c < DRAFT_VOCAB_CALIB; c++) {
      const calib = Array.from(
        { length: 16 },
        (_, i) => 1000 + ((c * 104729 + i * 15485863) % Math.max(1, vocab - 2000)),
      );
      for (const t of (await run(engine, calib, 48, 'off')).ids) counts.set(t, (counts.get(t) ?? 0) + 1);
    }
    const restricted = restrictHead(draftWeights, rankTokens(counts, vocab, Math.min(DRAFT_VOCAB, vocab)));
    draftSetups.set('draft-fr', { engine: await draftEngineOf(restricted.model), headTokens: restricted.tokens });
    console.log(
      `draft-fr head: ${restricted.tokens.length} of ${vocab} tokens (${counts.size} seen in ${DRAFT_VOCAB_CALIB} calibration outputs)`,
    );
  }
  const arms: Arm[] = ['lookup', ...draftSetups.keys(), 'off'];
  /** llama.cpp's arms: how each runs (llama-lookup, or llama-speculative-simple with the draft model). */
  const llama = new Map<Arm, { readonly maxDraft: number; readonly draftModel?: string }>();
  let llamaBin = '';
  if (args.includes('--llama')) {
    const found = llamaExamplesBin();
    if ('why' in found) console.log(`llama.cpp: none (${found.why})`);
    else {
      llamaBin = found.bin;
      llama.set('llama', { maxDraft: 0 });
      llama.set('llama-lookup', { maxDraft: SPEC.maxDraft });
      if (DRAFT_MODEL.endsWith('.gguf')) llama.set('llama-draft', { maxDraft: SPEC.maxDraft, draftModel: DRAFT_MODEL });
      arms.push(...llama.keys());
    }
  }
  const workloads: { readonly name: string; readonly prompt: readonly number[] }[] = [
    { name: 'quote', prompt: [...seedPrompt, ...text, ...seedPrompt] },
    // The model's own text so far (S G): where its greedy output repeats itself, the rest of the
    // answer is in the prompt (what a model that quotes or edits a given text does).
    { name: 'repeat', prompt: [...seedPrompt, ...text] },
    { name: 'free', prompt: seedPrompt.slice(0, 12).map((t, i) => (t + i * 17) % vocab) },
  ];
  if (model.tokenizer !== undefined && args.includes('--text')) {
    const paragraph = QUOTE;
    const ids = model.tokenizer.encode(paragraph);
    const again = model.tokenizer.encode(`${paragraph}\n\n${paragraph.slice(0, 60)}`);
    workloads.unshift({ name: 'text', prompt: again.length > ids.length ? again : ids });
  }
  console.log(`the model's greedy text: period ${periodOf(text) ?? 'none'} in its last 64 tokens`);
  console.log(
    `bench:spec  model ${MODEL}  kernels ${engine.kernels.dense}/${engine.kernels.ops}  threads ${THREADS}  ` +
      `tokens ${TOKENS}  rounds ${ROUNDS}  max draft ${SPEC.maxDraft}  draft model ${DRAFT_MODEL || 'none'}  load ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
  );
  for (const w of workloads) {
    if (ONLY !== '' && !ONLY.split(',').includes(w.name)) continue;
    // The shared draft model's counts are its lifetime's: this workload's are the difference.
    const drafterBefore = new Map([...sharedDrafters].map(([a, d]) => [a, d.stats]));
    draftTimes.clear();
    const tps = Object.fromEntries(arms.map((a) => [a, [] as number[]])) as Record<Arm, number[]>;
    const counts = Object.fromEntries(arms.map((a) => [a, { drafted: 0, accepted: 0 }])) as Record<
      Arm,
      { drafted: number; accepted: number }
    >;
    const llamaSame: boolean[] = [];
    let same = true;
    const promptFile = `/tmp/bench-spec-prompt-${process.pid}-${w.name}.txt`;
    if (llama.size > 0) writeFileSync(promptFile, model.tokenizer?.decode([...w.prompt]) ?? '');
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate the order each round so a drifting load hits every arm alike.
      const order = arms.map((_, i) => arms[(i + round) % arms.length] as Arm);
      const got: string[] = [];
      for (const arm of order) {
        const theirs = llama.get(arm);
        const o =
          theirs === undefined
            ? await run(engine, w.prompt, TOKENS, arm as OwnArm, isDraft(arm) ? draftSetups.get(arm) : undefined)
            : await runLlamaExample(llamaBin, { model: MODEL, promptFile, tokens: TOKENS, threads: THREADS, ...theirs })
                .then((r): Outcome => ({ ...r, ids: [...Buffer.from(r.text)] }))
                .catch((error: unknown) => failedRun(arm, error));
        tps[arm].push(o.decodeTokensPerS);
        got.push(JSON.stringify(o.ids));
        counts[arm].drafted += o.drafted;
        counts[arm].accepted += o.accepted;
      }
      // Tessera's arms give one output; llama.cpp's arms theirs (its kernels round differently).
      const own = order.flatMap((a, i) => (llama.has(a) ? [] : [got[i]]));
      const theirs = order.flatMap((a, i) => (llama.has(a) ? [got[i]] : []));
      same &&= own.every((g) => g === own[0]);
      llamaSame.push(theirs.every((g) => g === theirs[0]));
    }
    // Failed runs (NaN) left out; NaN when every run failed.
    const med = (all: number[]) => {
      const xs = all.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
      return xs.length === 0 ? Number.NaN : (xs[Math.floor(xs.length / 2)] as number);
    };
    const off = med(tps.off);
    const row = arms
      .filter((a) => a !== 'off')
      .map((a) => {
        if (a === 'llama')
          return `llama ${med(tps[a]).toFixed(1)} tok/s (tessera off / llama ${(off / med(tps[a])).toFixed(2)}x)`;
        const { drafted, accepted } = counts[a];
        const rate = drafted === 0 ? '-' : `${((100 * accepted) / drafted).toFixed(0)}%`;
        const drafter = isDraft(a) ? sharedDrafters.get(a) : undefined;
        const before = isDraft(a) ? drafterBefore.get(a) : undefined;
        const time = isDraft(a) ? draftTimeOf(a) : undefined;
        const pauses =
          drafter !== undefined && time !== undefined
            ? `, pauses ${drafter.stats.numPauses - (before?.numPauses ?? 0)}, ` +
              `cost ratio ${drafter.stats.costRatio?.toFixed(2)}, draft caught up on ` +
              `${drafter.stats.numCaughtUp - (before?.numCaughtUp ?? 0)} tokens, draft passes ` +
              `${((100 * time.draftMs) / time.decodeMs).toFixed(1)}% of its decode time`
            : '';
        // llama.cpp's speculation against llama.cpp's plain decoding; Tessera's against Tessera's.
        const base = a.startsWith('llama') ? med(tps.llama) : off;
        // The median of each round's own ratio (the two arms minutes apart at most): steadier than
        // the ratio of the medians when the machine's speed drifts between rounds.
        const paired = med(tps[a].map((x, i) => x / (a.startsWith('llama') ? tps.llama : tps.off)[i]!));
        return (
          `${a} ${med(tps[a]).toFixed(1)} tok/s ${(med(tps[a]) / base).toFixed(2)}x (paired ${paired.toFixed(2)}x; ` +
          `drafted ${drafted}, accepted ${rate}${pauses})`
        );
      });
    console.log(
      `${w.name.padEnd(6)} prompt ${String(w.prompt.length).padStart(4)}  off ${off.toFixed(1)} tok/s  ${row.join('  ')}  ` +
        `same output ${same}${llama.size === 0 ? '' : ` (llama.cpp arms agree: ${llamaSame.every(Boolean)})`} ` +
        ` [${arms.map((a) => `${a} ${tps[a].map((x) => x.toFixed(0)).join(' ')}`).join(' | ')}]`,
    );
  }
  for (const d of draftSetups.values()) await d.engine.dispose();
  await engine.dispose();
}

await main();
