// node-llama-cpp's decode speed on one GGUF, for bench/decode.ts: `batch` sequences of one
// context generating greedily in parallel (llama.cpp batches their tokens into one evaluation
// per step). Prompts are evaluated first; only the generation is timed. Benchmark code.
import type { LlamaModel } from 'node-llama-cpp';

export interface LlamaCppDecodeResult {
  readonly batch: number;
  readonly threads: number;
  readonly tokensPerSecond: number;
  readonly numTokens: number;
}

type NodeLlamaCpp = typeof import('node-llama-cpp');
type Llama = Awaited<ReturnType<NodeLlamaCpp['getLlama']>>;

export async function startLlamaCpp(): Promise<Llama> {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  return getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
}

export async function llamaCppDecode(
  model: LlamaModel,
  prompts: readonly (readonly number[])[],
  newTokens: number,
  threads: number,
): Promise<LlamaCppDecodeResult> {
  const batch = prompts.length;
  const longest = Math.max(...prompts.map((p) => p.length));
  const context = await model.createContext({
    sequences: batch,
    contextSize: batch * (longest + newTokens + 8),
    batchSize: Math.max(512, batch),
    threads,
  });
  try {
    const sequences = prompts.map(() => context.getSequence());
    // Prompts in, all but the last token; that one starts generation inside the timed part.
    await Promise.all(sequences.map((s, i) => s.evaluateWithoutGeneratingNewTokens(prompts[i]!.slice(0, -1) as never)));
    const started = performance.now();
    const counts = await Promise.all(
      sequences.map(async (s, i) => {
        let n = 0;
        for await (const token of s.evaluate([prompts[i]!.at(-1)!] as never, { temperature: 0, yieldEogToken: true })) {
          void token;
          if (++n >= newTokens) break;
        }
        return n;
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const numTokens = counts.reduce((a, b) => a + b, 0);
    return { batch, threads, tokensPerSecond: numTokens / seconds, numTokens };
  } finally {
    await context.dispose();
  }
}
