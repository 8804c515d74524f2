// The slice of the WebAssembly JS API the runtime uses, typed locally: the project compiles
// without the DOM lib (where TypeScript declares WebAssembly), and a global declaration here
// could clash with one added later. Only types and one accessor; no state.

export interface WasmModule {
  readonly __brand?: 'WebAssembly.Module';
}

export interface WasmMemory {
  readonly buffer: ArrayBufferLike;
  grow(deltaPages: number): number;
}

export interface WasmInstance {
  readonly exports: Record<string, unknown>;
}

interface WebAssemblyApi {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  instantiate(module: WasmModule, imports: Record<string, Record<string, unknown>>): Promise<WasmInstance>;
  Memory: new (descriptor: { initial: number; maximum: number; shared: boolean }) => WasmMemory;
}

export function webAssembly(): WebAssemblyApi {
  return (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;
}
