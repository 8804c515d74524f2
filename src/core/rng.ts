// Seeded randomness. Nothing in Tessera calls Math.random(): randomness is an argument,
// so a simulation seed or a request's `seed` reproduces a run exactly.

/** A 32-bit avalanche mix (the murmur3 finaliser). */
function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A stateless uniform draw in [0, 1) for (seed, stream, counter). Sampling uses
 * `uniformAt(seed, 0, step)`, so a prefill node that samples a request's first token and the
 * decode node that samples the rest agree without sharing any state.
 */
export function uniformAt(seed: number, stream: number, counter: number): number {
  let h = mix32((seed >>> 0) ^ 0x9e3779b9);
  h = mix32(h ^ Math.imul(stream >>> 0, 0x27d4eb2f));
  h = mix32(h ^ Math.imul(counter >>> 0, 0x165667b1));
  // 32 random bits -> [0, 1) with 2^-32 resolution.
  return h / 4294967296;
}

/** xoshiro128** with a splitmix32-seeded state: a small, fast, seeded PRNG. */
export class Rng {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;

  constructor(seed: number) {
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      return mix32(x);
    };
    this.#s0 = next();
    this.#s1 = next();
    this.#s2 = next();
    this.#s3 = next() | 1;
  }

  /** A uniform 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.#s1, 5), 7), 9) >>> 0;
    const t = this.#s1 << 9;
    this.#s2 ^= this.#s0;
    this.#s3 ^= this.#s1;
    this.#s1 ^= this.#s2;
    this.#s0 ^= this.#s3;
    this.#s2 ^= t;
    this.#s3 = rotl(this.#s3, 11);
    return result;
  }

  /** A uniform float in [0, 1). */
  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }

  /** A uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.nextFloat() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.nextFloat() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.int(items.length)] as T;
  }

  /** A standard normal draw (Box-Muller). */
  normal(): number {
    const u = 1 - this.nextFloat();
    const v = this.nextFloat();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
