// Builds TraceEvents for hand-written traces: one helper per node, and the common stretches of
// a request (reserve, transfer, decode) as functions, so each test reads as its protocol story.
import type { MessageType, PageAction, Role, TraceEvent } from '../../src/transfer/index.js';

export function node(name: string, role: Role) {
  return {
    send: (rid: string, message: MessageType, peer: string): TraceEvent => ({
      kind: 'send',
      node: name,
      role,
      rid,
      message,
      peer,
    }),
    recv: (rid: string, message: MessageType, peer: string): TraceEvent => ({
      kind: 'recv',
      node: name,
      role,
      rid,
      message,
      peer,
    }),
    drop: (rid: string, message: MessageType, why = 'state'): TraceEvent => ({
      kind: 'drop',
      node: name,
      role,
      rid,
      message,
      why,
    }),
    state: (rid: string, from: string, to: string): TraceEvent => ({ kind: 'state', node: name, role, rid, from, to }),
    page: (rid: string, action: PageAction, ...tags: [page: number, epoch: number][]): TraceEvent => ({
      kind: 'page',
      node: name,
      role,
      rid,
      action,
      pages: tags.map(([page, epoch]) => ({ page, epoch })),
    }),
    close: (peer: string): TraceEvent => ({ kind: 'close', node: name, role, peer }),
    outcome: (rid: string, outcome: 'success' | 'error', code?: string): TraceEvent =>
      code === undefined
        ? { kind: 'outcome', node: name, role, rid, outcome }
        : { kind: 'outcome', node: name, role, rid, outcome, code },
  };
}

export const router = node('router', 'router');
export const p0 = node('p0', 'prefill');
export const p1 = node('p1', 'prefill');
export const d0 = node('d0', 'decode');

type Tags = [page: number, epoch: number][];

/** Router -> d0: Reserve; d0 allocates `tags`; Reserved; router -> writer: Prefill; writer computes. */
export function reserveAndPrefill(rid: string, tags: Tags, writer = p0): TraceEvent[] {
  const w = writer.send(rid, 'KvChunk', 'd0').node;
  return [
    router.state(rid, 'Idle', 'Reserving'),
    router.send(rid, 'Reserve', 'd0'),
    d0.recv(rid, 'Reserve', 'router'),
    d0.page(rid, 'allocate', ...tags),
    d0.state(rid, 'Idle', 'AwaitingKv'),
    d0.send(rid, 'Reserved', 'router'),
    router.recv(rid, 'Reserved', 'd0'),
    router.state(rid, 'Reserving', 'Prefilling'),
    router.send(rid, 'Prefill', w),
    writer.recv(rid, 'Prefill', 'router'),
    writer.state(rid, 'Idle', 'Computing'),
  ];
}

/** The writer sends one KvChunk for `tag` and d0 writes and stamps it. */
export function chunk(rid: string, tag: [number, number], first: boolean, writer = p0): TraceEvent[] {
  const w = writer.send(rid, 'KvChunk', 'd0').node;
  return [
    writer.send(rid, 'KvChunk', 'd0'),
    d0.recv(rid, 'KvChunk', w),
    d0.page(rid, 'write', tag),
    d0.page(rid, 'stamp', tag),
    ...(first ? [d0.state(rid, 'AwaitingKv', 'Receiving')] : []),
  ];
}

/** KvDone (sent before the state change, as the code queues it), d0 verifies and Acks. */
export function done(rid: string, writer = p0): TraceEvent[] {
  const w = writer.send(rid, 'KvDone', 'd0').node;
  return [
    writer.send(rid, 'KvDone', 'd0'),
    writer.state(rid, 'Computing', 'AwaitingAck'),
    d0.recv(rid, 'KvDone', w),
    d0.state(rid, 'Receiving', 'Decoding'),
    d0.send(rid, 'Ack', w),
    writer.recv(rid, 'Ack', 'd0'),
    writer.state(rid, 'AwaitingAck', 'Released'),
  ];
}

/** One decode step reads every page, tokens stream, the pages are freed, the client gets success. */
export function decodeAndSucceed(rid: string, tags: Tags): TraceEvent[] {
  return [
    d0.page(rid, 'read', ...tags),
    d0.send(rid, 'Tokens', 'router'),
    router.recv(rid, 'Tokens', 'd0'),
    router.state(rid, 'Prefilling', 'Streaming'),
    d0.page(rid, 'free', ...tags),
    d0.state(rid, 'Decoding', 'Finished'),
    d0.send(rid, 'Finished', 'router'),
    router.recv(rid, 'Finished', 'd0'),
    router.state(rid, 'Streaming', 'Succeeded'),
    router.outcome(rid, 'success'),
  ];
}

/** A whole successful request on two pages in `epoch`. */
export function happyPath(rid: string, epoch: number, pages: [number, number] = [0, 1]): TraceEvent[] {
  const tags: Tags = pages.map((p) => [p, epoch]);
  return [
    ...reserveAndPrefill(rid, tags),
    ...chunk(rid, tags[0] as [number, number], true),
    ...chunk(rid, tags[1] as [number, number], false),
    ...done(rid),
    ...decodeAndSucceed(rid, tags),
  ];
}
