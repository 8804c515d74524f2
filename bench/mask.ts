// Structured-output benchmark (`npm run bench:mask`): the cost per token of constrained
// decoding (xgrammar's next-token mask, plus applying it in the sampler) beside one decode step
// of gen-model's m100 at batch 1, measured in the same run, over m100's 32,000-token (Llama 2)
// vocabulary. Prints the numbers and their ratio. Asserts nothing about speed.
//
//   node --import ./bench/lib/register-ts.mjs bench/mask.ts [--tokens N]
import { availableParallelism, homedir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_TENANT, NO_FAULTS, samplingParams } from '../src/core/index.js';
import { GrammarEngine, grammarVocab } from '../src/grammar/index.js';
import { createEngine, generate, Sampler } from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';
import { PRESET_CONFIGS, randomModel } from '../src/gen/index.js';

const args = process.argv.slice(2);
const at = args.indexOf('--tokens');
const NUM_TOKENS = at >= 0 ? Number(args[at + 1]) : 64;

const SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 40 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    tags: { type: 'array', items: { enum: ['novel', 'letter', 'ball', 'estate'] }, maxItems: 8 },
    address: {
      type: 'object',
      properties: { city: { type: 'string' }, zip: { type: 'string', pattern: '^[0-9]{5}$' } },
      required: ['city', 'zip'],
    },
  },
  required: ['name', 'age', 'tags', 'address'],
  additionalProperties: false,
};

async function main(): Promise<void> {
  // m100's tokenizer is builtin:tiny's (both use the Llama 2 vocabulary, 32,000 tokens).
  const tiny = await loadModel('builtin:tiny', {
    cacheDir: process.env['TESSERA_HOME'] ?? join(homedir(), '.cache', 'tessera'),
  });
  const config = PRESET_CONFIGS.m100;
  process.stderr.write('building m100 (random weights, in memory) ...\n');
  const engine = await createEngine(randomModel(config, 0), {
    deterministic: false,
    kvPages: 64,
    pageSize: 16,
    maxStepTokens: 64,
    maxStepLogits: 4,
    faults: NO_FAULTS,
  });

  // One decode step at batch 1 (best of 3 runs: other load only slows a run down).
  let stepMs = Infinity;
  for (let run = 0; run < 3; run++) {
    const { timing } = await generate(engine.runner, [
      {
        promptIds: [1, ...Array.from({ length: 15 }, (_, i) => 300 + i * 37)],
        sampling: samplingParams({ maxTokens: NUM_TOKENS, ignoreEos: true }),
      },
    ]);
    stepMs = Math.min(stepMs, timing.decodeMs / timing.numDecodeTokens);
  }

  // The mask per token: walk the grammar with random allowed tokens; time prepare() (the mask,
  // one round trip to the matcher thread) and the sampler's masked draw minus its plain one.
  // The compile is the checker thread's (a first request also waits for the matcher thread's).
  const grammar = new GrammarEngine(grammarVocab(tiny.tokenizer, config.vocabSize));
  const t0 = performance.now();
  await grammar.check({ kind: 'json_schema', schema: JSON.stringify(SCHEMA) }, 'schema', DEFAULT_TENANT);
  const compileMs = performance.now() - t0;
  // The first matcher: the matcher thread compiles the grammar (once per tenant and schema).
  const t1 = performance.now();
  const first = grammar.constraint({ kind: 'json_schema', schema: JSON.stringify(SCHEMA) }, DEFAULT_TENANT);
  await first.prepare();
  const firstMatcherMs = performance.now() - t1;
  first.dispose();
  const sampler = new Sampler(config.vocabSize);
  const logits = new Float32Array(config.vocabSize).map((_, i) => Math.sin(i * 12.9898) * 8);
  const params = samplingParams({ temperature: 1, seed: 1 });
  let maskMs = 0;
  let applyMs = 0;
  let numMasks = 0;
  for (let walk = 0; numMasks < NUM_TOKENS * 4; walk++) {
    const constraint = grammar.constraint({ kind: 'json_schema', schema: JSON.stringify(SCHEMA) }, DEFAULT_TENANT);
    for (let step = 0; step < 400; step++) {
      const a = performance.now();
      await constraint.prepare();
      if (constraint.isTerminated) break;
      const mask = constraint.mask();
      const b = performance.now();
      const token = sampler.sample(logits, { ...params, seed: walk }, step, [], mask);
      const c = performance.now();
      sampler.sample(logits, { ...params, seed: walk }, step, []);
      const d = performance.now();
      maskMs += b - a;
      applyMs += Math.max(0, c - b - (d - c));
      numMasks++;
      constraint.accept(token);
    }
    constraint.dispose();
  }
  const perToken = (maskMs + applyMs) / numMasks;
  const lines = [
    `m100 decode step, batch 1: ${stepMs.toFixed(2)} ms (${availableParallelism()} threads, ${engine.kernels.dense} dense)`,
    `schema check (32,000 tokens): ${compileMs.toFixed(0)} ms, checker thread start and compile (once per tenant and schema)`,
    `first matcher: ${firstMatcherMs.toFixed(0)} ms, matcher thread start and compile (once per tenant and schema)`,
    `mask per token: ${(maskMs / numMasks).toFixed(3)} ms xgrammar + ${(applyMs / numMasks).toFixed(3)} ms in the sampler = ${perToken.toFixed(3)} ms over ${numMasks} tokens`,
    `ratio: ${((perToken / stepMs) * 100).toFixed(2)}% of a decode step`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  await engine.dispose();
  await grammar.close();
}

await main();
