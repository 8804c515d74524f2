// One seeded run of the transfer protocol: 1 router, 2 prefill and 1-2 decode nodes driving the
// real state machines over real PageLedger/PagePool instances with small pools, several
// concurrent requests, and a network (network.ts) that delays, breaks connections and crashes
// nodes, and in chaos runs also drops, duplicates and reorders messages.
//
// Checked after every event (a failure is a violation, reported with the seed):
//   read   no decode step reads a position whose bytes were not written for its request
//          (ground truth: every slot's bytes are derived from (rid, position));
//   write  no KvChunk is written into a page the ledger does not hold for its rid in its epoch;
//   free   no decode page is freed or released while a KvChunk to it is in flight (TCP runs);
//   honest no success for an attempt any node failed, aborted or rejected, and a success
//          carries exactly the tokens the request's own KV gives;
//   ledger every pool's integrity;
//   acks   in TCP runs, no live writer is declared dead and no wait times out (an AbortAck or a
//          message that never comes is a bug there, not the network's doing).
// At the end: every request has an outcome (unless the router crashed), every machine is idle,
// every page of every live node is free.
import {
  FaultSet,
  NO_FAULTS,
  Rng,
  TesseraError,
  asRequestId,
  asTenantId,
  samplingParams,
  type RequestId,
  type Tag,
} from '../../../src/core/index.js';
import { PagePool } from '../../../src/pages/index.js';
import {
  DecodeMachine,
  LedgerDecodeHost,
  PrefillMachine,
  RouterMachine,
  type ClientOutcome,
  type DecodeEffect,
  type Message,
  type PeerId,
  type RouterEffect,
  type Timeouts,
  type TraceEvent,
} from '../../../src/transfer/index.js';
import { EventQueue } from './event-queue.js';
import { expectedToken, shape } from './kit.js';
import { SimNetwork, type FaultCounts, type NetEvent } from './network.js';
import { decodeStep, SIM_MODEL, SimPrefillHost, type DecodeJob } from './workers.js';

export interface SeedOptions {
  readonly seed: number;
  /** Fault points under test, active on every node. */
  readonly faults?: FaultSet;
  /** Drop/duplicate/reorder within connections; undefined: a third of the seeds. */
  readonly chaos?: boolean;
  /** A router bug that sends prefill stale or foreign destination tags; undefined: 1 seed in 20. */
  readonly badTags?: boolean;
}

export interface SeedResult {
  readonly seed: number;
  readonly chaos: boolean;
  readonly violations: string[];
  readonly trace: TraceEvent[];
  readonly injected: FaultCounts;
  readonly succeeded: number;
  readonly failed: number;
  readonly events: number;
  readonly checksumFailures: number;
  /** Outcomes by code ('success' for successes, 'none' when the router crashed first). */
  readonly outcomes: Record<string, number>;
  /** The prefill each Reserve named, by rid (the conformance checker's writerOf). */
  readonly writers: ReadonlyMap<string, string>;
}

const TIMEOUTS: Partial<Timeouts> = {
  reserveMs: 300,
  prefillMs: 3000,
  tokenMs: 400,
  cancelMs: 400,
  kvStartMs: 3000,
  frameMs: 400,
  abortAckMs: 150,
  abortRetries: 2,
  ackMs: 400,
  tombstoneMs: 20_000,
};
const MAX_EVENTS = 200_000;

type SimEvent =
  | NetEvent
  | { readonly kind: 'tick'; readonly node: PeerId }
  | { readonly kind: 'computeStart' | 'computeEnd'; readonly node: PeerId; readonly rid: RequestId }
  | { readonly kind: 'decodeStep'; readonly node: PeerId; readonly job: DecodeJob }
  | { readonly kind: 'submit'; readonly index: number }
  | { readonly kind: 'clientGone'; readonly rid: RequestId }
  | { readonly kind: 'crash'; readonly node: PeerId }
  | { readonly kind: 'reset' };

type Node =
  | { readonly role: 'router'; readonly id: PeerId; readonly machine: RouterMachine; tickAt: number | undefined }
  | {
      readonly role: 'prefill';
      readonly id: PeerId;
      readonly machine: PrefillMachine;
      readonly host: SimPrefillHost;
      tickAt: number | undefined;
    }
  | {
      readonly role: 'decode';
      readonly id: PeerId;
      readonly machine: DecodeMachine;
      readonly pool: PagePool;
      readonly jobs: Map<RequestId, DecodeJob>;
      tickAt: number | undefined;
    };

interface Client {
  readonly rid: RequestId;
  readonly tokens: number[];
  readonly maxTokens: number;
  readonly received: number[];
  outcome: ClientOutcome | undefined;
}

export function runSeed(options: SeedOptions): SeedResult {
  return new SimRun(options).run();
}

class SimRun {
  readonly #rng: Rng;
  readonly #faults: FaultSet;
  readonly #chaos: boolean;
  readonly #queue = new EventQueue<SimEvent>();
  readonly #nodes = new Map<PeerId, Node>();
  readonly #clients: Client[] = [];
  readonly #doomed = new Set<string>();
  readonly #writers = new Map<string, string>();
  readonly #violations: string[] = [];
  readonly #trace: TraceEvent[] = [];
  readonly #injected: FaultCounts = {};
  readonly #net: SimNetwork;
  readonly #seed: number;
  #now = 0;
  #events = 0;

  constructor(options: SeedOptions) {
    this.#seed = options.seed;
    this.#rng = new Rng(options.seed);
    this.#faults = options.faults ?? NO_FAULTS;
    this.#chaos = options.chaos ?? this.#rng.chance(1 / 3);
    const numDecodes = 1 + this.#rng.int(2);
    const roles = new Map<PeerId, 'router' | 'prefill' | 'decode'>([
      ['router', 'router'],
      ['p0', 'prefill'],
      ['p1', 'prefill'],
    ]);
    for (let i = 0; i < numDecodes; i++) roles.set(`d${i}`, 'decode');
    this.#net = new SimNetwork(
      this.#rng,
      this.#queue as EventQueue<unknown>,
      { chaos: this.#chaos, dropP: 0.02, dupP: 0.02, reorderP: 0.05, maxLatencyMs: 2 },
      roles,
      this.#injected,
    );
    if (options.badTags ?? this.#rng.chance(0.05)) this.#net.tamper = (m, to) => this.#tamper(m, to);
    this.#build(roles);
    this.#workload();
  }

  #count(kind: string): void {
    this.#injected[kind] = (this.#injected[kind] ?? 0) + 1;
  }

  #violation(message: string): void {
    if (this.#violations.length < 20) this.#violations.push(`t=${this.#now.toFixed(3)}ms ${message}`);
  }

  #build(roles: ReadonlyMap<PeerId, string>): void {
    const faults = this.#faults;
    const pickPair = (_req: unknown, avoid: { readonly prefills: readonly PeerId[] }) => {
      const prefills = ['p0', 'p1'].filter((p) => !avoid.prefills.includes(p));
      const decodes = [...roles.keys()].filter((n) => n.startsWith('d'));
      return prefills.length === 0 ? undefined : { prefill: this.#rng.pick(prefills), decode: this.#rng.pick(decodes) };
    };
    this.#nodes.set('router', {
      role: 'router',
      id: 'router',
      machine: new RouterMachine({
        node: 'router',
        contextLength: 44,
        pickPair,
        timeouts: TIMEOUTS,
        trace: this.#sink(),
      }),
      tickAt: undefined,
    });
    for (const id of ['p0', 'p1']) {
      const pool = PagePool.create(shape(4 + this.#rng.int(7)), faults);
      const host = new SimPrefillHost(pool, 24 + this.#rng.int(24), {
        scheduleCompute: (rid) =>
          this.#queue.push(this.#now + this.#rng.nextFloat() * 2, { kind: 'computeStart', node: id, rid }),
        violation: (m) => this.#violation(`${id}: ${m}`),
      });
      this.#nodes.set(id, {
        role: 'prefill',
        id,
        machine: new PrefillMachine({ node: id, host, faults, timeouts: TIMEOUTS, trace: this.#sink() }),
        host,
        tickAt: undefined,
      });
    }
    for (const [id, role] of roles) {
      if (role !== 'decode') continue;
      const pool = PagePool.create(shape(5 + this.#rng.int(8)), faults);
      const host = new LedgerDecodeHost({ pool, model: SIM_MODEL, contextLength: 24 + this.#rng.int(24), faults });
      this.#nodes.set(id, {
        role: 'decode',
        id,
        machine: new DecodeMachine({ node: id, host, faults, timeouts: TIMEOUTS, trace: this.#sink() }),
        pool,
        jobs: new Map(),
        tickAt: undefined,
      });
    }
  }

  #workload(): void {
    const rng = this.#rng;
    const numRequests = 2 + rng.int(6);
    for (let i = 0; i < numRequests; i++) {
      const rid = asRequestId(`s${this.#seed}r${i}`);
      const tokens = Array.from({ length: 1 + rng.int(24) }, () => rng.int(1000));
      this.#clients.push({ rid, tokens, maxTokens: 1 + rng.int(5), received: [], outcome: undefined });
      const at = rng.nextFloat() * 40;
      this.#queue.push(at, { kind: 'submit', index: i });
      if (rng.chance(0.15)) this.#queue.push(at + rng.nextFloat() * 80, { kind: 'clientGone', rid });
    }
    if (rng.chance(0.2)) {
      const r = rng.nextFloat();
      const node = r < 0.6 ? rng.pick(['p0', 'p1']) : r < 0.9 ? 'd0' : 'router';
      this.#queue.push(rng.nextFloat() * 100, { kind: 'crash', node });
    }
    if (rng.chance(0.2))
      for (let i = 0, n = 1 + rng.int(2); i < n; i++) this.#queue.push(rng.nextFloat() * 100, { kind: 'reset' });
  }

  /** A router bug: prefill gets a stale epoch, or another page, as one destination tag. */
  #tamper(m: Message, to: PeerId): Message {
    if (m.type !== 'Prefill' || m.tags.length === 0 || !this.#rng.chance(0.5)) return m;
    this.#count('bad-tags');
    const i = this.#rng.int(m.tags.length);
    const t = m.tags[i] as Tag;
    const bad = {
      page: t.epoch > 1 && this.#rng.chance(0.5) ? t.page : ((t.page + 1) as Tag['page']),
      epoch: (t.epoch > 1 ? t.epoch - 1 : t.epoch) as Tag['epoch'],
    };
    void to;
    return { ...m, tags: m.tags.map((x, j) => (j === i ? bad : x)) };
  }

  #sink() {
    return { emit: (e: TraceEvent) => this.#onTrace(e) };
  }

  #onTrace(e: TraceEvent): void {
    this.#trace.push(e);
    if (e.kind === 'send' && (e.message === 'Failed' || e.message === 'Rejected')) this.#doomed.add(e.rid);
    if (e.kind === 'state' && (e.to === 'Aborting' || e.to === 'Cancelling') && e.role !== 'prefill')
      this.#doomed.add(e.rid);
    if (e.kind === 'outcome' && e.outcome === 'success' && this.#doomed.has(e.rid))
      this.#violation(`router reported success for ${e.rid}, which a node failed, rejected or aborted`);
    if (e.kind !== 'page' || e.role !== 'decode') return;
    const node = this.#nodes.get(e.node);
    if (node?.role !== 'decode') return;
    for (const p of e.pages) {
      const entry = node.pool.ledger.entry(p.page as Tag['page']);
      if (e.action === 'write' && !(entry.state === 'allocated' && entry.rid === e.rid && entry.epoch === p.epoch)) {
        this.#violation(
          `${e.node} wrote a KvChunk of ${e.rid} into page ${p.page} (frame epoch ${p.epoch}), which the ledger does not hold for it: ${entry.state} epoch ${entry.epoch}`,
        );
      }
      if (
        (e.action === 'free' || e.action === 'release') &&
        !this.#chaos &&
        this.#net.writeInFlight(e.node, p.page, p.epoch)
      ) {
        this.#violation(
          `${e.node} freed page ${p.page} epoch ${p.epoch} of ${e.rid} while a KvChunk to it is still in flight`,
        );
      }
    }
  }

  run(): SeedResult {
    for (let ev = this.#queue.pop(); ev !== undefined; ev = this.#queue.pop()) {
      this.#now = ev.at;
      if (++this.#events > MAX_EVENTS) {
        this.#violation(`no quiescence after ${MAX_EVENTS} events`);
        break;
      }
      this.#dispatch(ev.event);
      for (const n of this.#nodes.values()) {
        if (this.#net.isCrashed(n.id) || n.role === 'router') continue;
        try {
          (n.role === 'prefill' ? n.host.pool : n.pool).checkIntegrity();
        } catch (error) {
          this.#violation(`${n.id} ledger integrity: ${(error as Error).message}`);
        }
      }
      if (this.#violations.length > 0) break;
    }
    if (this.#violations.length === 0) this.#checkEnd();
    let succeeded = 0;
    for (const c of this.#clients) if (c.outcome?.ok === true) succeeded++;
    let checksumFailures = 0;
    for (const n of this.#nodes.values())
      if (n.role === 'decode') checksumFailures += n.machine.stats().checksumFailures;
    const outcomes: Record<string, number> = {};
    for (const c of this.#clients) {
      const code = c.outcome === undefined ? 'none' : c.outcome.ok ? 'success' : c.outcome.error.code;
      outcomes[code] = (outcomes[code] ?? 0) + 1;
    }
    return {
      seed: this.#seed,
      chaos: this.#chaos,
      violations: this.#violations,
      trace: this.#trace,
      injected: this.#injected,
      succeeded,
      failed: this.#clients.length - succeeded,
      events: this.#events,
      checksumFailures,
      outcomes,
      writers: this.#writers,
    };
  }

  #dispatch(ev: SimEvent): void {
    switch (ev.kind) {
      case 'deliver':
        if (this.#net.accept(ev)) this.#apply(ev.to, { kind: 'received', from: ev.from, message: ev.message });
        return;
      case 'connected':
        if (this.#net.accept(ev) && !this.#net.isCrashed(ev.node))
          this.#apply(ev.node, { kind: 'connected', peer: ev.peer });
        return;
      case 'closed':
        if (!this.#net.accept(ev) || this.#net.isCrashed(ev.node)) return;
        this.#net.noticeClosed(ev);
        this.#apply(ev.node, { kind: 'closed', peer: ev.peer, reason: ev.reason });
        return;
      case 'tick': {
        const node = this.#nodes.get(ev.node) as Node;
        if (this.#net.isCrashed(ev.node) || node.tickAt !== this.#now) return;
        node.tickAt = undefined;
        this.#apply(ev.node, { kind: 'tick' });
        return;
      }
      case 'computeStart':
      case 'computeEnd':
        return this.#compute(ev.kind, ev.node, ev.rid);
      case 'decodeStep':
        return this.#decode(ev.node, ev.job);
      case 'submit': {
        const c = this.#clients[ev.index] as Client;
        this.#apply('router', {
          kind: 'submit',
          request: {
            rid: c.rid,
            tenant: asTenantId('t0'),
            tokens: c.tokens,
            sampling: samplingParams({ maxTokens: c.maxTokens }),
          },
        });
        return;
      }
      case 'clientGone':
        this.#count('client-gone');
        this.#apply('router', { kind: 'clientGone', rid: ev.rid });
        return;
      case 'crash':
        if (!this.#net.isCrashed(ev.node)) this.#net.crash(this.#now, ev.node);
        return;
      case 'reset':
        this.#net.reset(this.#now);
        return;
      default:
        throw new Error(`unknown event ${(ev as { kind: string }).kind}`);
    }
  }

  #compute(kind: 'computeStart' | 'computeEnd', id: PeerId, rid: RequestId): void {
    const node = this.#nodes.get(id);
    if (node?.role !== 'prefill' || this.#net.isCrashed(id)) return;
    if (kind === 'computeStart') {
      if (node.host.startStep(rid) !== undefined)
        this.#queue.push(this.#now + 0.5 + this.#rng.nextFloat() * 5, { kind: 'computeEnd', node: id, rid });
      return;
    }
    const fail = this.#rng.chance(0.02);
    const result = node.host.endStep(rid, 1 + this.#rng.int(6), fail);
    if (result === undefined) return;
    if (result.kind === 'stopped') return this.#apply(id, { kind: 'computeStopped', rid });
    if (result.kind === 'failed') {
      this.#count('compute-failure');
      return this.#apply(id, {
        kind: 'computeFailed',
        rid,
        error: new TesseraError('internal', 'injected compute failure'),
      });
    }
    const { job, firstToken } = result;
    if (firstToken === undefined) {
      this.#apply(id, { kind: 'computed', rid, numTokens: job.pos, tags: job.tags });
      this.#queue.push(this.#now + this.#rng.nextFloat(), { kind: 'computeStart', node: id, rid });
    } else {
      this.#apply(id, { kind: 'computeDone', rid, tags: job.tags, firstToken, firstLogprobs: [] });
    }
  }

  #decode(id: PeerId, job: DecodeJob): void {
    const node = this.#nodes.get(id);
    if (node?.role !== 'decode' || this.#net.isCrashed(id) || node.jobs.get(job.owner.rid) !== job) return;
    const rid = job.owner.rid;
    if (this.#rng.chance(0.02)) {
      this.#count('decode-failure');
      this.#endDecode(node, job);
      return this.#apply(id, {
        kind: 'decodeFailed',
        rid,
        error: new TesseraError('internal', 'injected decode failure'),
      });
    }
    const step = decodeStep(node.pool, job, {
      scheduleCompute: () => {},
      violation: (m) => this.#violation(`${id}: ${m}`),
      read: (tags) =>
        this.#onTrace({
          kind: 'page',
          node: id,
          role: 'decode',
          rid,
          action: 'read',
          pages: tags.map((t) => ({ page: t.page, epoch: t.epoch })),
        }),
    });
    if (step.kind === 'failed') {
      this.#endDecode(node, job);
      return this.#apply(id, { kind: 'decodeFailed', rid, error: step.error });
    }
    if (step.kind === 'token') this.#apply(id, { kind: 'decodeTokens', rid, ids: [step.id], logprobs: [] });
    if (step.kind === 'finished' || step.last) {
      this.#endDecode(node, job);
      return this.#apply(id, { kind: 'decodeFinished', rid, finishReason: 'length' });
    }
    this.#queue.push(this.#now + 0.2 + this.#rng.nextFloat() * 3, { kind: 'decodeStep', node: id, job });
  }

  #endDecode(node: Extract<Node, { role: 'decode' }>, job: DecodeJob): void {
    node.jobs.delete(job.owner.rid);
    node.pool.ledger.free(job.tags, job.owner);
    this.#onTrace({
      kind: 'page',
      node: node.id,
      role: 'decode',
      rid: job.owner.rid,
      action: 'free',
      pages: job.tags.map((t) => ({ page: t.page, epoch: t.epoch })),
    });
  }

  #apply(
    id: PeerId,
    input:
      | Parameters<RouterMachine['handle']>[1]
      | Parameters<PrefillMachine['handle']>[1]
      | Parameters<DecodeMachine['handle']>[1],
  ): void {
    const node = this.#nodes.get(id) as Node;
    if (this.#net.isCrashed(id)) return;
    const effects: (RouterEffect | DecodeEffect)[] =
      node.role === 'router'
        ? node.machine.handle(this.#now, input as Parameters<RouterMachine['handle']>[1])
        : node.role === 'prefill'
          ? node.machine.handle(this.#now, input as Parameters<PrefillMachine['handle']>[1])
          : node.machine.handle(this.#now, input as Parameters<DecodeMachine['handle']>[1]);
    for (const e of effects) this.#effect(node, e);
    const wake = node.machine.wakeAtMs();
    if (wake !== undefined && (node.tickAt === undefined || wake < node.tickAt || node.tickAt < this.#now)) {
      node.tickAt = Math.max(wake, this.#now);
      this.#queue.push(node.tickAt, { kind: 'tick', node: id });
    }
  }

  #effect(node: Node, e: RouterEffect | DecodeEffect): void {
    switch (e.kind) {
      case 'send':
        if (e.message.type === 'Reserve') this.#writers.set(e.message.rid, e.message.prefillAddress);
        return this.#net.send(this.#now, node.id, e.to, e.message);
      case 'closePeer':
        return this.#net.closePeer(this.#now, node.id, e.peer, e.reason);
      case 'clientTokens': {
        const c = this.#clients.find((x) => x.rid === e.rid);
        if (c === undefined || c.outcome !== undefined) return this.#violation(`tokens for ${e.rid} after its outcome`);
        c.received.push(...e.ids);
        return;
      }
      case 'clientOutcome': {
        const c = this.#clients.find((x) => x.rid === e.rid) as Client;
        if (c.outcome !== undefined) return this.#violation(`a second outcome for ${e.rid}`);
        c.outcome = e.outcome;
        if (e.outcome.ok) {
          const want = Array.from({ length: c.maxTokens }, (_, step) =>
            expectedToken(e.outcome.ok ? e.outcome.attempt : c.rid, c.tokens.length, step),
          );
          if (JSON.stringify(c.received) !== JSON.stringify(want))
            this.#violation(
              `${e.rid} succeeded with tokens ${JSON.stringify(c.received)}, its own KV gives ${JSON.stringify(want)}`,
            );
        }
        return;
      }
      case 'startDecoding': {
        if (node.role !== 'decode') return;
        const job: DecodeJob = {
          owner: e.owner,
          tags: e.tags,
          promptTokens: e.promptTokens,
          maxTokens: e.sampling.maxTokens,
          produced: 1,
        };
        node.jobs.set(e.rid, job);
        this.#queue.push(this.#now + this.#rng.nextFloat() * 2, { kind: 'decodeStep', node: node.id, job });
        return;
      }
      case 'transferTimed':
        return; // a metric: it decides nothing
      case 'stopDecoding': {
        if (node.role !== 'decode') return;
        const job = node.jobs.get(e.rid);
        if (job !== undefined) this.#endDecode(node, job);
        return;
      }
      default:
        throw new Error(`unknown effect ${(e as { kind: string }).kind}`);
    }
  }

  #checkEnd(): void {
    const routerUp = !this.#net.isCrashed('router');
    for (const c of this.#clients)
      if (routerUp && c.outcome === undefined) this.#violation(`${c.rid} never got an outcome`);
    for (const n of this.#nodes.values()) {
      if (this.#net.isCrashed(n.id)) continue;
      if (n.machine.numActive > 0)
        this.#violation(`${n.id} still has ${n.machine.numActive} request(s) in progress at the end`);
      if (n.role === 'router') {
        if (!this.#chaos && this.#clients.some((c) => c.outcome?.ok === false && c.outcome.error.code === 'timeout'))
          this.#violation('a wait timed out on a TCP network (a message that should have come never came)');
        if (!this.#chaos && n.machine.stats().cancelTimeouts > 0)
          this.#violation('decode never acknowledged a router Abort on a TCP network');
        continue;
      }
      const pool = n.role === 'prefill' ? n.host.pool : n.pool;
      const counts = pool.ledger.counts();
      if (counts.free !== pool.ledger.numPages)
        this.#violation(`${n.id} ends with pages not free: ${JSON.stringify(counts)}`);
      const stats = n.role === 'decode' ? n.machine.stats() : undefined;
      if (
        stats !== undefined &&
        !this.#chaos &&
        stats.writersDeclaredDead > stats.writersNeverConnected &&
        !this.#net.isCrashed('p0') &&
        !this.#net.isCrashed('p1')
      ) {
        this.#violation(`${n.id} declared a live prefill dead: an Abort was never acknowledged on a TCP network`);
      }
    }
  }
}
