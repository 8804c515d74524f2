// Request ids and server-drawn seeds, from one seeded Rng (no Math.random). A rid is
// `<8 hex digits from the seed>-<counter>`: unique within this server, and unlikely to collide
// with another server's as long as src/cli gives each process a different seed.
// Must never hand out the same rid twice.
import { Rng, asRequestId, type RequestId } from '../../core/index.js';

export class RequestIds {
  readonly #rng: Rng;
  readonly #prefix: string;
  #count = 0;

  constructor(seed: number) {
    this.#rng = new Rng(seed);
    this.#prefix = this.#rng.nextU32().toString(16).padStart(8, '0');
  }

  nextRid(): RequestId {
    this.#count += 1;
    return asRequestId(`${this.#prefix}-${this.#count}`);
  }

  /** A sampling seed for a request that did not give one. */
  drawSeed(): number {
    return this.#rng.nextU32();
  }
}
