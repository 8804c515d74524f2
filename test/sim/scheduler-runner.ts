// A fake model runner for scheduler tests: it does to the pool exactly what the real runner
// does — checkRead for the context, checkWrite for the new positions, write K/V, stamp — but its
// "model" is trivial: K of a position is the token there, V the tenant's code, and the sampled
// token is a seeded function of (rid, position). So a test can check by content that every
// position a request reads holds its own token, written for its own tenant.
// Speculation: an item with drafts (verifiesDrafts) writes every drafted position, accepts the
// drafts while each equals the "model's" token there, and the harness rolls the rejected
// positions' stamps back before complete(), as the engine loop does (engine/spec-verify.ts).
import {
  asRequestId,
  asTenantId,
  assertNever,
  isPageCheckError,
  NO_FAULTS,
  samplingParams,
  uniformAt,
  type BatchItem,
  type FaultSet,
  type GenerateRequest,
  type RequestId,
  type SamplingParams,
  type Tag,
  type TenantId,
} from '../../src/core/index.js';
import { kvOffset, PagePool, PrefixCache } from '../../src/pages/index.js';
import {
  Scheduler,
  tokenCap,
  type AdmitResult,
  type PrefillLimit,
  type Role,
  type SchedulerEvent,
  type StepPlan,
  type SpecOptions,
  type StepResult,
} from '../../src/scheduler/index.js';

export interface FakeRunnerOptions {
  readonly pool: PagePool;
  /** Every token of a request as the test knows it (prompt, then output), to check reads by content. */
  readonly tokensOf: (rid: RequestId) => readonly number[];
  /** Token ids to sample from: [0, vocabSize). */
  readonly vocabSize: number;
  readonly seed: number;
  /** Test-only sabotage: leave the last page an item writes unstamped. */
  readonly forgetLastStamp?: boolean;
}

export class FakeRunner {
  readonly #o: FakeRunnerOptions;
  readonly #tenantCodes = new Map<TenantId, number>();
  /** Content seen by a read that was not the reader's own: a leak the page checks let through. */
  readonly contentViolations: string[] = [];
  numPageCheckFailures = 0;
  numDrafted = 0;
  numAccepted = 0;
  numItems = 0;
  numTokens = 0;

  constructor(options: FakeRunnerOptions) {
    this.#o = options;
  }

  /** The token the model "samples" after position `position` of rid. */
  sample(rid: RequestId, position: number): number {
    return Math.floor(uniformAt(this.#o.seed ^ hash(rid), 0, position) * this.#o.vocabSize);
  }

  run(items: readonly BatchItem[]): StepResult[] {
    return items.map((item) => this.#runOne(item));
  }

  #runOne(item: BatchItem): StepResult {
    const { pool } = this.#o;
    const pageSize = pool.pageSize;
    const who = { rid: item.rid, tenant: item.tenant };
    const end = item.startPos + item.tokens.length;
    this.numItems++;
    this.numTokens += item.tokens.length;
    try {
      pool.checkRead(who, item.tags, item.startPos);
      const written = item.tags.slice(Math.floor(item.startPos / pageSize), Math.ceil(end / pageSize));
      pool.checkWrite(who, written);
    } catch (error) {
      if (!isPageCheckError(error)) throw error;
      this.numPageCheckFailures++;
      return { kind: 'failed', rid: item.rid, error };
    }
    const expected = this.#o.tokensOf(item.rid);
    const code = this.#tenantCode(item.tenant);
    for (let pos = 0; pos < item.startPos; pos++) {
      const [k, v] = this.#read(item.tags, pos);
      if (k !== expected[pos] || v !== code) {
        this.contentViolations.push(
          `${item.rid} read (${k}, ${v}) at position ${pos}, expected (${expected[pos]}, ${code})`,
        );
        break;
      }
    }
    const numDrafts = item.verifiesDrafts === true ? item.tokens.length - 1 : 0;
    item.tokens.forEach((token, i) => {
      const pos = item.startPos + i;
      if (i < item.tokens.length - numDrafts && token !== expected[pos])
        // drafts are guesses, not yet its tokens
        this.contentViolations.push(`${item.rid} was fed token ${token} at position ${pos}, expected ${expected[pos]}`);
      this.#write(item.tags, pos, token, code);
    });
    const first = Math.floor(item.startPos / pageSize);
    const last = Math.ceil(end / pageSize) - 1;
    for (let i = first; i <= last; i++) {
      if (this.#o.forgetLastStamp === true && i === last) continue;
      pool.stamp(item.tags[i] as Tag, Math.min(pageSize, end - i * pageSize));
    }
    if (numDrafts > 0) {
      // Row j verifies the draft at position startPos + 1 + j against the model's token there.
      const accepted: { token: number }[] = [];
      for (let j = 1; j <= numDrafts; j++) {
        const want = this.sample(item.rid, item.startPos + j);
        if (item.tokens[j] !== want) break;
        accepted.push({ token: want });
      }
      const token = this.sample(item.rid, item.startPos + 1 + accepted.length);
      this.numDrafted += numDrafts;
      this.numAccepted += accepted.length;
      return { kind: 'sampled', rid: item.rid, token, drafts: { numDrafted: numDrafts, accepted } };
    }
    return item.wantLogits
      ? { kind: 'sampled', rid: item.rid, token: this.sample(item.rid, end) }
      : { kind: 'computed', rid: item.rid };
  }

  /** Writes K/V of positions [0, tokens.length) as the runner would (no checks, no stamps: the caller does those). */
  writeFor(tenant: TenantId, tags: readonly Tag[], tokens: readonly number[]): void {
    const code = this.#tenantCode(tenant);
    tokens.forEach((token, pos) => this.#write(tags, pos, token, code));
  }

  #read(tags: readonly Tag[], pos: number): [number, number] {
    const { kv } = this.#o.pool;
    const page = (tags[Math.floor(pos / kv.pageSize)] as Tag).page;
    const slot = pos % kv.pageSize;
    return [kv.data[kvOffset(kv, page, 0, 0, slot)] as number, kv.data[kvOffset(kv, page, 0, 1, slot)] as number];
  }

  #write(tags: readonly Tag[], pos: number, token: number, code: number): void {
    const { kv } = this.#o.pool;
    const page = (tags[Math.floor(pos / kv.pageSize)] as Tag).page;
    const slot = pos % kv.pageSize;
    kv.data[kvOffset(kv, page, 0, 0, slot)] = token;
    kv.data[kvOffset(kv, page, 0, 1, slot)] = code;
  }

  #tenantCode(tenant: TenantId): number {
    let code = this.#tenantCodes.get(tenant);
    if (code === undefined) {
      code = 1000 + this.#tenantCodes.size;
      this.#tenantCodes.set(tenant, code);
    }
    return code;
  }
}

function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export interface HarnessOptions {
  readonly role?: Role;
  readonly numPages?: number;
  readonly pageSize?: number;
  readonly contextLength?: number;
  readonly maxRunningRequests?: number;
  readonly chunkedPrefillSize?: number;
  readonly maxWaiting?: number;
  /** With a tenant-scoped prefix cache (default true). */
  readonly cache?: boolean;
  readonly faults?: FaultSet;
  readonly eosTokenIds?: readonly number[];
  readonly vocabSize?: number;
  readonly seed?: number;
  readonly forgetLastStamp?: boolean;
  /** Prompt-lookup speculation for decodes; rejected positions rolled back unless keep-rejected-stamps. */
  readonly speculation?: SpecOptions;
  /** Each step's milliseconds, reported as the engine loop does (observeStepCost); none: no step times. */
  readonly stepMs?: number;
}

/** A scheduler on a tiny pool with a fake runner, stepping the loop a worker runs and checking integrity around every step. */
export class SchedulerHarness {
  readonly pool: PagePool;
  readonly cache: PrefixCache | undefined;
  readonly scheduler: Scheduler;
  readonly runner: FakeRunner;
  /** Prompt then output, as the events told: what the runner checks reads against. */
  readonly known = new Map<RequestId, number[]>();
  /** The last event that ended each request: finished, failed or prefilled. */
  readonly ended = new Map<RequestId, SchedulerEvent>();
  readonly events: SchedulerEvent[] = [];
  numSteps = 0;
  readonly #faults: FaultSet;
  readonly #stepMs: number | undefined;

  constructor(o: HarnessOptions = {}) {
    const faults = o.faults ?? NO_FAULTS;
    const pageSize = o.pageSize ?? 4;
    this.pool = PagePool.create(
      { numPages: o.numPages ?? 11, pageSize, numLayers: 1, numKvHeads: 1, headDim: 1 },
      faults,
    );
    this.cache = o.cache === false ? undefined : new PrefixCache({ pool: this.pool, faults });
    this.scheduler = new Scheduler({
      role: o.role ?? 'colocated',
      pool: this.pool,
      ...(this.cache === undefined ? {} : { prefixCache: this.cache }),
      pageSize,
      contextLength: o.contextLength ?? 64,
      maxRunningRequests: o.maxRunningRequests ?? 4,
      chunkedPrefillSize: o.chunkedPrefillSize ?? 16,
      maxWaiting: o.maxWaiting ?? 64,
      faults,
      eosTokenIds: o.eosTokenIds ?? [],
      ...(o.speculation === undefined ? {} : { speculation: o.speculation }),
    });
    this.#faults = faults;
    this.#stepMs = o.stepMs;
    this.runner = new FakeRunner({
      pool: this.pool,
      tokensOf: (rid) => this.known.get(rid) ?? [],
      vocabSize: o.vocabSize ?? 1000,
      seed: o.seed ?? 1,
      forgetLastStamp: o.forgetLastStamp ?? false,
    });
  }

  request(
    rid: string,
    tenant: string,
    prompt: readonly number[],
    maxTokens: number,
    sampling: Partial<SamplingParams> = {},
  ): GenerateRequest {
    return {
      rid: asRequestId(rid),
      tenant: asTenantId(tenant),
      promptTokens: prompt,
      sampling: samplingParams({ maxTokens, ...sampling }),
    };
  }

  admit(
    rid: string,
    tenant: string,
    prompt: readonly number[],
    maxTokens: number,
    sampling: Partial<SamplingParams> = {},
  ): AdmitResult {
    const result = this.scheduler.admit(this.request(rid, tenant, prompt, maxTokens, sampling));
    if (result.kind === 'admitted') this.known.set(asRequestId(rid), [...prompt]);
    return result;
  }

  /**
   * One turn of the worker's loop; integrity is checked with the step in flight and after it.
   * `limit`: a step budget, or a cap on the prefill tokens beside n decodes (tokenCap).
   */
  step(limit?: PrefillLimit | ((numDecodes: number) => number)): { plan: StepPlan; events: SchedulerEvent[] } {
    const plan = this.scheduler.schedule(typeof limit === 'function' ? tokenCap(limit) : limit);
    this.scheduler.checkIntegrity();
    this.record(plan.events);
    const results = plan.items.length > 0 ? this.run(plan.items) : [];
    const events = plan.items.length > 0 ? this.scheduler.complete(results) : [];
    if (this.#stepMs !== undefined && plan.items.length > 0) {
      const numTokens = plan.items.reduce((n, item) => n + item.tokens.length, 0);
      this.scheduler.observeStepCost(numTokens, this.#stepMs, 0);
    }
    this.record(events);
    this.scheduler.checkIntegrity();
    this.numSteps++;
    return { plan, events };
  }

  /**
   * The runner's results for a step's items, after what the engine loop does between verification
   * and complete(): the rejected drafts' positions rolled back (unless keep-rejected-stamps).
   */
  run(items: readonly BatchItem[]): StepResult[] {
    const results = this.runner.run(items);
    items.forEach((item, i) => {
      const result = results[i];
      if (item.verifiesDrafts !== true || result?.kind !== 'sampled') return;
      if (this.#faults.has('keep-rejected-stamps')) return;
      const keptEnd = item.startPos + 1 + (result.drafts?.accepted.length ?? 0);
      this.pool.rollbackStamps(item.tags, keptEnd, item.startPos + item.tokens.length);
    });
    return results;
  }

  /** Steps until nothing runs or waits; returns the steps taken. Throws after maxSteps. */
  runUntilDone(maxSteps = 1000): number {
    let n = 0;
    while (this.scheduler.numRunning + this.scheduler.numWaiting > 0) {
      if (n++ >= maxSteps) throw new Error(`not done after ${maxSteps} steps`);
      this.step();
    }
    return n;
  }

  /** What a peer's transfer does on a decode node: write and stamp positions [0, numTokens) of the prompt. */
  transfer(
    rid: string,
    tenant: string,
    tags: readonly Tag[],
    prompt: readonly number[],
    numTokens = prompt.length,
  ): void {
    const who = { rid: asRequestId(rid), tenant: asTenantId(tenant) };
    const pageSize = this.pool.pageSize;
    this.known.set(who.rid, [...prompt]);
    this.pool.checkWrite(who, tags.slice(0, Math.ceil(numTokens / pageSize)));
    this.runner.writeFor(who.tenant, tags, prompt.slice(0, numTokens));
    for (let i = 0; i * pageSize < numTokens; i++)
      this.pool.stamp(tags[i] as Tag, Math.min(pageSize, numTokens - i * pageSize));
  }

  outputOf(rid: string): number[] {
    const known = this.known.get(asRequestId(rid)) ?? [];
    const view = this.scheduler.view(asRequestId(rid));
    const ended = this.ended.get(asRequestId(rid));
    const numPrompt = view?.numPromptTokens ?? (ended?.kind === 'finished' ? ended.usage.promptTokens : 0);
    return known.slice(numPrompt);
  }

  /** Notes events: output tokens extend `known`, ends go to `ended`. */
  record(events: readonly SchedulerEvent[]): void {
    for (const event of events) {
      this.events.push(event);
      switch (event.kind) {
        case 'token':
          this.known.get(event.rid)?.push(event.token);
          break;
        case 'finished':
        case 'failed':
        case 'prefilled':
          this.ended.set(event.rid, event);
          break;
        default:
          assertNever(event, 'event');
      }
    }
  }
}
