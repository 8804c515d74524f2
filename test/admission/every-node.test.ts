// One table of admission cases, run against every kind of node that checks a request before it
// allocates: the API front door, the router machine, the router's pair policy, the co-located,
// prefill and decode schedulers, the transfer layer's decode host and the simulation's prefill
// host. Each node calls the one rule (src/pages/admission.ts) with its own limits; this suite
// pins that every node reaches the same verdict with the same words for the same case.
import { describe, expect, it } from 'vitest';
import {
  asRequestId,
  asTenantId,
  FaultSet,
  NO_FAULTS,
  samplingParams,
  type TesseraError,
} from '../../src/core/index.js';
import { admissionError, contextLengthError, PagePool, type PoolRole } from '../../src/pages/index.js';
import type { CommonParams } from '../../src/api/openai/params.js';
import { planSampling } from '../../src/api/openai/prompt.js';
import { clusterAdmission, type WorkerView } from '../../src/router/index.js';
import { LedgerDecodeHost, RouterMachine, type RouterEffect } from '../../src/transfer/index.js';
import { SchedulerHarness } from '../sim/scheduler-runner.js';
import { SimPrefillHost } from '../sim/transfer/workers.js';

/** Every node in the table: context 64, pool of 11 pages of 4 = 44 tokens (a misconfigured node). */
const LIMITS = { contextLength: 64, pageSize: 4, numPages: 11 };

type Verdict = 'ok' | 'context_length_exceeded' | 'pool_too_small' | 'invalid_request';

/**
 * prompt tokens, max_tokens, then the verdict of a node that checks the context only (API, router
 * machine), of one whose pool keeps the prompt only (prefill), and of one whose pool keeps prompt
 * and output (co-located, decode; the pair policy, whose stricter side is decode).
 */
const CASES: readonly (readonly [number, number, Verdict, Verdict, Verdict])[] = [
  [1, 1, 'ok', 'ok', 'ok'],
  [40, 4, 'ok', 'ok', 'ok'],
  [41, 4, 'ok', 'ok', 'pool_too_small'],
  [44, 20, 'ok', 'ok', 'pool_too_small'],
  [45, 19, 'ok', 'pool_too_small', 'pool_too_small'],
  [57, 7, 'ok', 'pool_too_small', 'pool_too_small'],
  [57, 8, 'context_length_exceeded', 'context_length_exceeded', 'context_length_exceeded'],
  [10, 60, 'context_length_exceeded', 'context_length_exceeded', 'context_length_exceeded'],
  [0, 4, 'invalid_request', 'invalid_request', 'invalid_request'],
];

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const codeOf = (error: TesseraError | undefined): Verdict => (error === undefined ? 'ok' : (error.code as Verdict));

interface Judged {
  readonly code: Verdict;
  readonly message: string | undefined;
}
const judged = (error: TesseraError | undefined): Judged => ({ code: codeOf(error), message: error?.message });

/** A node kind: what it says about a request of prompt + max tokens. */
type Node = (numPromptTokens: number, maxTokens: number) => Judged;

function schedulerNode(role: PoolRole): Node {
  return (numPromptTokens, maxTokens) => {
    const h = new SchedulerHarness({ role, ...LIMITS });
    const request = h.request('r', 't', range(numPromptTokens), maxTokens);
    const result = role === 'decode' ? h.scheduler.reserve(request) : h.scheduler.admit(request);
    if (result.kind !== 'rejected') return judged(undefined);
    expect(h.pool.ledger.lastEpoch).toBe(0); // refused before any allocation
    return judged(result.error);
  };
}

const pool = () =>
  PagePool.create({ numPages: LIMITS.numPages, pageSize: LIMITS.pageSize, numLayers: 1, numKvHeads: 1, headDim: 1 });
const owner = { rid: asRequestId('r'), tenant: asTenantId('t') };

const decodeHost: Node = (numPromptTokens, maxTokens) => {
  const host = new LedgerDecodeHost({ pool: pool(), model: 'm', contextLength: LIMITS.contextLength });
  const verdict = host.reserve(owner, numPromptTokens, samplingParams({ maxTokens }));
  return judged(verdict.kind === 'rejected' ? verdict.error : undefined);
};

const simPrefillHost: Node = (numPromptTokens, maxTokens) => {
  const host = new SimPrefillHost(pool(), LIMITS.contextLength, {
    scheduleCompute: () => undefined,
    violation: () => undefined,
  });
  const verdict = host.admit(owner, range(numPromptTokens), samplingParams({ maxTokens }));
  return judged(verdict.kind === 'rejected' ? verdict.error : undefined);
};

const routerMachine: Node = (numPromptTokens, maxTokens) => {
  const machine = new RouterMachine({
    node: 'router',
    contextLength: LIMITS.contextLength,
    pickPair: () => ({ prefill: 'p', decode: 'd' }),
  });
  const request = {
    rid: asRequestId('r'),
    tenant: asTenantId('t'),
    tokens: range(numPromptTokens),
    sampling: samplingParams({ maxTokens }),
  };
  const effects: readonly RouterEffect[] = machine.handle(0, { kind: 'submit', request });
  const outcome = effects.find((e) => e.kind === 'clientOutcome');
  return judged(outcome?.kind === 'clientOutcome' && !outcome.outcome.ok ? outcome.outcome.error : undefined);
};

const worker = (url: string, role: 'prefill' | 'decode'): WorkerView => ({
  url,
  role,
  address: url,
  up: true,
  limits: { ...LIMITS, kvBytesPerToken: 8, kvDtype: 'f32', model: 'm' },
  inFlight: 0,
  freePages: LIMITS.numPages,
});

/** The router's cluster admission over one prefill and one decode with these limits: the stricter side decides. */
const pairPolicy: Node = (numPromptTokens, maxTokens) =>
  judged(clusterAdmission(numPromptTokens, maxTokens, [worker('p', 'prefill'), worker('d', 'decode')]));

const API_DEFAULTS: CommonParams = {
  model: null,
  maxTokens: null,
  temperature: 1,
  topP: 1,
  topK: 0,
  seed: 1,
  stop: [],
  stopTokenIds: [],
  ignoreEos: false,
  presencePenalty: 0,
  frequencyPenalty: 0,
  n: 1,
  logprobs: null,
  stream: false,
  includeUsage: false,
  returnTokenIds: false,
};
const apiContext = {
  contextLength: LIMITS.contextLength,
  vocabSize: 100,
  faults: NO_FAULTS,
  drawSeed: () => 1,
  promptParam: 'prompt',
};

/** The API checks the context only (it knows no pool); an empty prompt never gets this far (a 400 on parsing). */
const api: Node = (numPromptTokens, maxTokens) => {
  const planned = planSampling(numPromptTokens, { ...API_DEFAULTS, maxTokens }, apiContext);
  return planned.kind === 'ok'
    ? judged(undefined)
    : { code: planned.problem.code as Verdict, message: planned.problem.message };
};

/** The pair policy answers with the prefill side's refusal when there is one, else the decode side's. */
const pairRole = (p: number, m: number): PoolRole =>
  admissionError(LIMITS, 'prefill', p, m) === undefined ? 'decode' : 'prefill';

/** Each node, the column of the table it answers to, and the role its pool refusals name. */
const NODES: readonly (readonly [
  string,
  Node,
  'context only' | 'prompt' | 'prompt+output',
  (p: number, m: number) => PoolRole,
])[] = [
  ['co-located scheduler', schedulerNode('colocated'), 'prompt+output', () => 'colocated'],
  ['prefill scheduler', schedulerNode('prefill'), 'prompt', () => 'prefill'],
  ['decode scheduler (reserve)', schedulerNode('decode'), 'prompt+output', () => 'decode'],
  ['transfer LedgerDecodeHost', decodeHost, 'prompt+output', () => 'decode'],
  ['simulation prefill host', simPrefillHost, 'prompt', () => 'prefill'],
  ['router pair policy (prefill + decode)', pairPolicy, 'prompt+output', pairRole],
  ['router machine', routerMachine, 'context only', () => 'decode'],
  ['api planSampling', api, 'context only', () => 'decode'],
];

describe.each(NODES)('admission on the %s', (_name, node, column, roleOf) => {
  it.each(CASES)(
    'prompt %i + max_tokens %i',
    (numPromptTokens, maxTokens, contextOnly, promptOnly, promptAndOutput) => {
      // The API parser refuses an empty prompt before this check (`prompt` encodes to no tokens).
      if (node === api && numPromptTokens === 0) return;
      const role = roleOf(numPromptTokens, maxTokens);
      const expected = column === 'context only' ? contextOnly : column === 'prompt' ? promptOnly : promptAndOutput;
      const got = node(numPromptTokens, maxTokens);
      expect(got.code).toBe(expected);
      // One wording: a context refusal reads the same on every node; a pool refusal is the rule's own.
      if (got.code === 'context_length_exceeded') {
        expect(got.message).toBe(contextLengthError(LIMITS.contextLength, numPromptTokens, maxTokens)?.message);
      } else if (got.code === 'pool_too_small') {
        expect(got.message).toBe(admissionError(LIMITS, role, numPromptTokens, maxTokens)?.message);
      }
    },
  );
});

describe('negative control: a node that skips the rule', () => {
  it('answers ok where the table says pool_too_small, so this suite would catch a node that stopped calling it', () => {
    const h = new SchedulerHarness({ role: 'colocated', ...LIMITS, faults: new FaultSet(['skip-admission']) });
    expect(h.scheduler.admit(h.request('r', 't', range(41), 4)).kind).toBe('admitted');
    expect(schedulerNode('colocated')(41, 4).code).toBe('pool_too_small');
  });
});

describe('the rule itself', () => {
  it('is the table: context before pool, each role with its own room', () => {
    for (const [p, m, , promptOnly, promptAndOutput] of CASES) {
      expect(codeOf(admissionError(LIMITS, 'prefill', p, m))).toBe(promptOnly);
      expect(codeOf(admissionError(LIMITS, 'colocated', p, m))).toBe(promptAndOutput);
      expect(codeOf(admissionError(LIMITS, 'decode', p, m))).toBe(promptAndOutput);
    }
  });

  it("speaks vLLM's words, naming max_tokens, or the prompt's field when max_tokens was not given", () => {
    expect(contextLengthError(16, 3, 14)).toMatchObject({
      param: 'max_tokens',
      message:
        "This model's maximum context length is 16 tokens. However, you requested 17 tokens (3 in the messages, 14 in the completion). " +
        'Please reduce the length of the messages or completion.',
    });
    expect(contextLengthError(16, 16, null, 'messages')).toMatchObject({
      param: 'messages',
      message:
        "This model's maximum context length is 16 tokens. However, you requested 16 tokens in the messages. Please reduce the length of the messages.",
    });
    expect(contextLengthError(16, 15, null)).toBeUndefined();
    expect(admissionError(LIMITS, 'colocated', 41, 4)?.message).toMatch(
      /^This colocated node's KV pool holds 44 tokens \(11 pages of 4\), but this request needs 45 tokens \(12 pages\) for 41 prompt tokens \+ 4 completion tokens\./,
    );
  });
});
