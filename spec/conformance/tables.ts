// The model's names and state machines (spec/tessera.pml), as data: per role, its states in the
// model's numbering, the edges it may take, and the states a sender may be in around each send.
// Owns: nothing but these tables. Must never drift from the Promela: test/conformance/
// tables.test.ts parses tessera.pml and compares every name, number and edge.
import type { MessageType, PageAction, Role } from '../../src/transfer/index.js';

/** Index = the model's ROLE_* number. */
export const ROLES = ['router', 'prefill', 'decode'] as const satisfies readonly Role[];

/** Index = the model's R_* / P_* / D_* number. 'Idle': no record of the request yet. */
export const STATES = {
  router: ['Idle', 'Reserving', 'Prefilling', 'Streaming', 'Cancelling', 'Succeeded', 'Failed'],
  prefill: ['Idle', 'Computing', 'AwaitingAck', 'Aborting', 'Released', 'Aborted'],
  decode: ['Idle', 'AwaitingKv', 'Receiving', 'Decoding', 'Aborting', 'Finished', 'Released'],
} as const satisfies Record<Role, readonly string[]>;

export type StateOf<R extends Role> = (typeof STATES)[R][number];

/** Index = the model's M_* number. Same order as Message in src/transfer/messages.ts. */
export const MESSAGES = [
  'Reserve',
  'Reserved',
  'Rejected',
  'Prefill',
  'KvChunk',
  'KvDone',
  'Ack',
  'Tokens',
  'Finished',
  'Failed',
  'Abort',
  'AbortAck',
] as const satisfies readonly MessageType[];

/** Index = the model's A_* number. */
export const PAGE_ACTIONS = ['allocate', 'write', 'stamp', 'read', 'free', 'quarantine', 'release'] as const satisfies readonly PageAction[];

/** Index = the model's PG_* number ('cached', the prefix cache, is not modelled). */
export const PAGE_STATES = ['free', 'allocated', 'quarantined'] as const;
export type PageState = (typeof PAGE_STATES)[number];

/** Index = the model's OUT_* number. */
export const OUTCOMES = ['none', 'success', 'rejected', 'error'] as const;

/** Index = the model's WHY_* number. */
export const DROP_REASONS = ['state'] as const;

/** Every state change the model makes: R_EDGE, P_EDGE and D_EDGE of tessera.pml, in order. */
export const EDGES = {
  router: [
    ['Idle', 'Reserving'],
    ['Idle', 'Failed'],
    ['Reserving', 'Prefilling'],
    ['Reserving', 'Failed'],
    ['Reserving', 'Cancelling'],
    ['Prefilling', 'Streaming'],
    ['Prefilling', 'Failed'],
    ['Prefilling', 'Cancelling'],
    ['Streaming', 'Succeeded'],
    ['Streaming', 'Failed'],
    ['Streaming', 'Cancelling'],
    ['Cancelling', 'Failed'],
  ],
  decode: [
    ['Idle', 'AwaitingKv'],
    ['Idle', 'Released'],
    ['AwaitingKv', 'Receiving'],
    ['AwaitingKv', 'Aborting'],
    ['AwaitingKv', 'Released'],
    ['Receiving', 'Decoding'],
    ['Receiving', 'Aborting'],
    ['Receiving', 'Released'],
    ['Decoding', 'Finished'],
    ['Decoding', 'Released'],
    ['Aborting', 'Released'],
  ],
  prefill: [
    ['Idle', 'Computing'],
    ['Idle', 'Aborted'],
    ['Computing', 'AwaitingAck'],
    ['Computing', 'Aborting'],
    ['Computing', 'Aborted'],
    ['AwaitingAck', 'Released'],
    ['AwaitingAck', 'Aborted'],
    ['Aborting', 'Aborted'],
  ],
} as const satisfies { readonly [R in Role]: readonly (readonly [StateOf<R>, StateOf<R>])[] };

/** States that end a request on that role (its record becomes a tombstone). */
export const TERMINAL = {
  router: ['Succeeded', 'Failed'],
  prefill: ['Released', 'Aborted'],
  decode: ['Finished', 'Released'],
} as const satisfies { readonly [R in Role]: readonly StateOf<R>[] };

/** Entering one of these means some node decided the request fails (the model's `doom`). */
export const DOOMING = {
  router: ['Cancelling', 'Failed'],
  prefill: ['Aborting', 'Aborted'],
  decode: ['Aborting', 'Released'],
} as const satisfies { readonly [R in Role]: readonly StateOf<R>[] };

/**
 * The messages each role sends, and the states its request may be in when the send is traced:
 * the state after the step's state change (the model's order), or before it (code that queues
 * the send first). A send absent here is one the model never makes.
 */
export const SENDS = {
  router: {
    Reserve: ['Reserving'],
    Prefill: ['Prefilling'],
    Abort: ['Prefilling', 'Cancelling', 'Failed'],
  },
  decode: {
    Reserved: ['AwaitingKv'],
    Rejected: ['Released'],
    Ack: ['Decoding'],
    Tokens: ['Decoding', 'Finished'],
    Finished: ['Finished'],
    Failed: ['Aborting', 'Released'],
    Abort: ['Aborting', 'Released'],
    AbortAck: ['Idle', 'AwaitingKv', 'Receiving', 'Decoding', 'Aborting', 'Finished', 'Released'],
  },
  prefill: {
    KvChunk: ['Computing'],
    KvDone: ['Computing', 'AwaitingAck'],
    Rejected: ['Aborted'],
    Failed: ['Aborting', 'Aborted'],
    // "I will never write rid's pages again": only once the request has ended here.
    AbortAck: ['Aborted', 'Released'],
  },
} as const satisfies { readonly [R in Role]: Partial<Record<MessageType, readonly StateOf<R>[]>> };

export function isEdge(role: Role, from: string, to: string): boolean {
  return (EDGES[role] as readonly (readonly [string, string])[]).some(([a, b]) => a === from && b === to);
}
