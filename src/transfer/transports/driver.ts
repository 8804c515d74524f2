// MachineDriver: runs one sans-IO transfer machine (router, prefill or decode) on a real clock:
// feeds it inputs one at a time, carries out its effects, and keeps one timer armed at its
// wakeAtMs(). The loop of machine.ts, written once for the worker roles and the router.
// Owns: the input queue (an input that arrives while effects are being carried out, e.g. from a
// carry-out that feeds the machine back, waits its turn: handle() is never re-entered) and the
// timer. Must never: call machine.handle() re-entrantly, drop an input, queue a view it was lent
// for the duration of a call (a KvChunk piece that has to wait is copied), or leave the timer
// armed after stop().
import { clearTimeout, setTimeout } from 'node:timers';
import type { ChunkInput, Machine, NetworkInput } from '../machine.js';
import type { ChunkHandlers, TransportHandlers } from './types.js';

/** Node's setTimeout fires at once for delays above 2^31-1 ms; wake up at least this often. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export class MachineDriver<Input extends { readonly kind: string }, Effect> {
  readonly #machine: Machine<Input, Effect>;
  readonly #carryOut: (effect: Effect) => void;
  readonly #now: () => number;
  readonly #queue: Input[] = [];
  #busy = false;
  #stopped = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The wakeAtMs the timer is armed for (re-armed only when it changes: pieces come by the thousand). */
  #armedAtMs: number | undefined;

  constructor(machine: Machine<Input, Effect>, carryOut: (effect: Effect) => void, now: () => number = Date.now) {
    this.#machine = machine;
    this.#carryOut = carryOut;
    this.#now = now;
  }

  /** Feed one input (now, or after the input being handled, in arrival order). */
  handle(input: Input): void {
    if (this.#stopped) return;
    this.#queue.push(input);
    if (this.#busy) return;
    this.#busy = true;
    try {
      for (let next = this.#queue.shift(); next !== undefined; next = this.#queue.shift()) {
        for (const effect of this.#machine.handle(this.#now(), next)) this.#carryOut(effect);
      }
    } finally {
      this.#busy = false;
    }
    this.#arm();
  }

  /** The transport's events as machine inputs. */
  handlers(this: MachineDriver<Input | NetworkInput, Effect>): TransportHandlers {
    return {
      connected: (peer) => this.handle({ kind: 'connected', peer }),
      message: (from, message) => this.handle({ kind: 'received', from, message }),
      closed: (peer, reason) => this.handle({ kind: 'closed', peer, reason }),
    };
  }

  /** KvChunks as they come off the wire, as machine inputs (for handlers.chunks). */
  chunkHandlers(this: MachineDriver<Input | ChunkInput, Effect>): ChunkHandlers {
    return {
      begin: (from, head) => this.handle({ kind: 'chunkBegin', from, head }),
      // Handled at once unless an input is being handled: then it waits its turn, and the view it
      // was lent (valid only during this call) must be copied.
      piece: (from, bytes) => this.handle({ kind: 'chunkPiece', from, bytes: this.#busy ? bytes.slice() : bytes }),
      end: (from) => this.handle({ kind: 'chunkEnd', from }),
    };
  }

  /** No more inputs, no more ticks. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#armedAtMs = undefined;
  }

  #arm(): void {
    const at = this.#stopped ? undefined : this.#machine.wakeAtMs();
    if (at === this.#armedAtMs && (at === undefined) === (this.#timer === undefined)) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#armedAtMs = at;
    if (at === undefined) return;
    const delayMs = Math.min(MAX_TIMER_MS, Math.max(0, at - this.#now()));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#armedAtMs = undefined;
      this.handle({ kind: 'tick' } as Input);
    }, delayMs);
    this.#timer.unref?.();
  }
}
