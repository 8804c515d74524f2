// Invariant checks. A broken invariant is a bug in Tessera, never a user mistake:
// it throws InvariantError and the process (or test) fails loudly.
import { InvariantError } from './errors/invariant-error.js';

export function assert(condition: unknown, message: string | (() => string)): asserts condition {
  if (!condition) {
    throw new InvariantError(typeof message === 'function' ? message() : message);
  }
}

/** Exhaustiveness check for `switch` over a tagged union. */
export function assertNever(value: never, what = 'value'): never {
  throw new InvariantError(`unexpected ${what}: ${JSON.stringify(value)}`);
}
