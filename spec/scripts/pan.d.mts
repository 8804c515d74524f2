// Types of pan.mjs, for the TypeScript tests that drive SPIN (test/conformance).
export declare const SPEC_DIR: string;
export declare const MODEL: string;
export declare const MODEL_PARTS: string;
export declare const LEASE_MODEL: string;

export interface VerifyOptions {
  readonly model?: 'tessera' | 'lease';
  readonly defines?: readonly string[];
  readonly mode: 'safety' | 'liveness';
  readonly optimize?: boolean;
  readonly hashBits?: number;
  readonly memLimitMb?: number;
  readonly bfs?: boolean;
  readonly keepTrail?: boolean;
  readonly timeoutSec?: number;
}

export interface PanReport {
  readonly errors: number | undefined;
  readonly stateVectorBytes: number | undefined;
  readonly depthReached: number | undefined;
  readonly statesStored: number | undefined;
  readonly transitions: number | undefined;
  readonly memoryMb: number | undefined;
  readonly violation: { readonly message: string; readonly depth: number } | undefined;
  readonly complete: boolean;
  readonly truncated: boolean;
  readonly outOfMemory: boolean;
  readonly text: string;
}

export interface VerifyResult extends PanReport {
  readonly seconds: number;
  readonly timedOut: boolean;
  /** spin -t's replay of the counterexample (with keepTrail). */
  readonly trail: string | undefined;
}

export declare function requireTools(): void;
export declare function verify(options: VerifyOptions): VerifyResult;
export declare function simulate(options: { seed: number; defines?: readonly string[]; maxSteps?: number }): string;
export declare function parsePan(text: string): PanReport;
export declare function fmt(n: number | undefined): string;
