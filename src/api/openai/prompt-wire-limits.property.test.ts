// One validation, shared by the API and the wire: whatever the API accepts, the cluster codec
// round-trips. fast-check draws request bodies near every limit (top_k around 2^31, stop
// strings around 1024 characters, up to 1100 stop token ids, odd tenants) and runs them through
// the API's own steps (validateCompletion, core's requestLimitViolation, planSampling); each
// accepted one, encoded as the Reserve and Prefill the router sends, must decode to itself.
// The negative control: fault `skip-request-limits` (the API skips core's limits) makes the same
// property fail; and past each limit the codec refuses what the API would then accept.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  asRequestId,
  asTenantId,
  FaultSet,
  NO_FAULTS,
  REQUEST_LIMITS,
  requestLimitViolation,
  tenantNameProblem,
  type SamplingParams,
} from '../../core/index.js';
import { decodeFrame, encodeFrame } from '../../transfer/index.js';
import type { Message } from '../../transfer/index.js';
import { planSampling } from './prompt.js';
import { validateCompletion } from './validate-completion.js';

const CONTEXT = 1 << 20;
const VOCAB = 2 ** 31 + 8; // larger than any wire token id, so the vocabulary check hides nothing

const near = (limit: number): fc.Arbitrary<number> =>
  fc.oneof(fc.integer({ min: limit - 3, max: limit + 3 }), fc.integer({ min: -2, max: 50 }));
const body = fc.record(
  {
    prompt: fc.constant([1, 2, 3]),
    top_k: fc.oneof(near(2 ** 31), fc.constant(2 ** 53 - 1), fc.integer({ min: -1, max: 100 })),
    stop: fc.oneof(
      fc.string({ minLength: 1, maxLength: 8 }),
      fc.array(fc.string({ minLength: 1, maxLength: 1030 }), { maxLength: 18 }),
      fc.array(fc.string({ unit: 'binary', minLength: 1, maxLength: 4 }), { maxLength: 3 }),
    ),
    stop_token_ids: fc.array(fc.oneof(fc.nat(100), fc.constant(2 ** 31), fc.constant(2 ** 31 - 1)), {
      maxLength: 1100,
    }),
    max_tokens: fc.oneof(fc.integer({ min: 1, max: 64 }), near(CONTEXT - 3)),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    top_p: fc.double({ min: 0, max: 1, noNaN: true }),
    seed: fc.oneof(fc.integer(), fc.constant(Number.MAX_SAFE_INTEGER), fc.constant(Number.MIN_SAFE_INTEGER)),
    presence_penalty: fc.double({ min: -2, max: 2, noNaN: true }),
    logprobs: fc.integer({ min: 0, max: 20 }),
    ignore_eos: fc.boolean(),
  },
  { requiredKeys: ['prompt'] },
);
const tenant = fc.oneof(fc.string({ minLength: 0, maxLength: 260 }), fc.string({ unit: 'binary', maxLength: 300 }));

/** The API's steps for one body: the sampling it would send, or null where it answers 400. */
function acceptedSampling(json: unknown, checkLimits: boolean, faults = NO_FAULTS): SamplingParams | null {
  // (validateCompletion checks the limits itself; checking again shows which rule refused.)
  const call = validateCompletion(json, faults);
  if (call.kind === 'bad') return null;
  if (checkLimits && requestLimitViolation(call.value.params) !== null) return null;
  const ctx = { contextLength: CONTEXT, vocabSize: VOCAB, faults, drawSeed: () => 7, promptParam: 'prompt' };
  const planned = planSampling(3, call.value.params, ctx);
  return planned.kind === 'ok' ? planned.value : null;
}

function roundTrips(sampling: SamplingParams, tenantName: string): boolean {
  const rid = asRequestId('r1.1');
  const messages: Message[] = [
    {
      type: 'Reserve',
      rid,
      tenant: asTenantId(tenantName),
      promptTokens: 3,
      promptDigest: '0123456789abcdef',
      sampling,
      prefillAddress: '127.0.0.1:1',
    },
    {
      type: 'Prefill',
      rid,
      tenant: asTenantId(tenantName),
      tokens: [1, 2, 3],
      sampling,
      decodeAddress: '127.0.0.1:2',
      tags: [],
      pageSize: 16,
    },
  ];
  try {
    return messages.every((m) => JSON.stringify(decodeFrame(encodeFrame(m))) === JSON.stringify(m));
  } catch {
    return false;
  }
}

/** The property: every body the API accepts (with `faults`), with every tenant the CLI accepts, round-trips. */
const acceptedRoundTrips = (faults: FaultSet) =>
  fc.property(body, tenant, (json, name) => {
    const sampling = acceptedSampling(json, false, faults);
    const tenantName = tenantNameProblem(name) === null ? name : 'fallback';
    return sampling === null || roundTrips(sampling, tenantName);
  });

describe('the API and the wire share one validation', () => {
  it('every request the API accepts, with every tenant the CLI accepts, round-trips through the codec', () => {
    fc.assert(acceptedRoundTrips(NO_FAULTS), { numRuns: 400, seed: 17 });
  });

  it('negative control: with skip-request-limits the same property fails (the API accepts what the codec refuses)', () => {
    const run = fc.check(acceptedRoundTrips(new FaultSet(['skip-request-limits'])), { numRuns: 400, seed: 17 });
    expect(run.failed).toBe(true);
  });

  it('a tenant name the CLI refuses is one the codec refuses, and the other way round', () => {
    const sampling = acceptedSampling({ prompt: [1] }, true) as SamplingParams;
    fc.assert(
      fc.property(tenant, (name) => {
        expect(roundTrips(sampling, name)).toBe(tenantNameProblem(name) === null);
      }),
      { numRuns: 400, seed: 3 },
    );
    expect(tenantNameProblem('x'.repeat(REQUEST_LIMITS.maxTenantChars + 1))).not.toBeNull();
    expect(tenantNameProblem('a\u0007b')).not.toBeNull();
  });

  it('names the field at fault: top_k, stop, stop_token_ids', () => {
    const cases: [unknown, string][] = [
      [{ prompt: [1], top_k: 2 ** 31 }, 'top_k'],
      [{ prompt: [1], stop: ['x'.repeat(1025)] }, 'stop'],
      [{ prompt: [1], stop_token_ids: Array.from({ length: 1025 }, () => 1) }, 'stop_token_ids'],
    ];
    for (const [json, param] of cases) {
      const call = validateCompletion(json);
      expect(call.kind === 'bad' ? call.problem.param : 'accepted').toBe(param);
    }
  });

  it('the API and the codec draw each line at the same place: at the limit both accept, past it both refuse', () => {
    const L = REQUEST_LIMITS;
    const edges: [Record<string, unknown>, Partial<SamplingParams>, Partial<SamplingParams>][] = [
      [{ top_k: L.maxTopK }, { topK: L.maxTopK }, { topK: L.maxTopK + 1 }],
      [
        { stop: ['x'.repeat(L.maxStopChars)] },
        { stop: ['x'.repeat(L.maxStopChars)] },
        { stop: ['x'.repeat(L.maxStopChars + 1)] },
      ],
      [
        { stop_token_ids: new Array<number>(L.maxStopTokenIds).fill(1) },
        {},
        { stopTokenIds: new Array<number>(L.maxStopTokenIds + 1).fill(1) },
      ],
      [
        { stop: new Array<string>(L.maxStopStrings).fill('s') },
        {},
        { stop: new Array<string>(L.maxStopStrings + 1).fill('s') },
      ],
    ];
    const base = acceptedSampling({ prompt: [1], max_tokens: 4 }, true) as SamplingParams;
    for (const [fields, atLimit, pastLimit] of edges) {
      expect(acceptedSampling({ prompt: [1], max_tokens: 4, ...fields }, true)).not.toBeNull();
      expect(roundTrips({ ...base, ...atLimit }, 'alice')).toBe(true);
      // Past the limit: the codec refuses it (what closed decode's connection before the API checked it).
      expect(roundTrips({ ...base, ...pastLimit }, 'alice')).toBe(false);
    }
  });
});
