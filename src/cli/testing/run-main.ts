// Test support: run the CLI's main() in-process with stdout and stderr captured.
// Must never be imported by production code.
import { main } from '../main.js';

export interface MainRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export async function runMain(args: string[]): Promise<MainRun> {
  let stdout = '';
  let stderr = '';
  const { stdout: out, stderr: err } = process;
  const writeOut = out.write;
  const writeErr = err.write;
  out.write = ((chunk: unknown) => ((stdout += String(chunk)), true)) as typeof out.write;
  err.write = ((chunk: unknown) => ((stderr += String(chunk)), true)) as typeof err.write;
  try {
    return { code: await main(args), stdout, stderr };
  } finally {
    out.write = writeOut;
    err.write = writeErr;
  }
}
