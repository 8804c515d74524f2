// Types of mutants.mjs, for test/conformance.
export declare const MUTANTS: readonly (readonly [
  name: string,
  what: string,
  mode: 'safety' | 'liveness',
  model?: 'tessera' | 'lease',
])[];
export declare function classify(message: string): string | null;
