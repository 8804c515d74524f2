// Child processes of `tessera up`: spawned with a prefix for their log lines, watched for the
// lines that say where they listen, stopped with SIGTERM and, after a grace period, SIGKILL.
// Each child gets TESSERA_SUPERVISED=1 and a stdin pipe: when `up` dies, even by kill -9, the
// pipe closes and the child stops (lifecycle.ts), so nothing is orphaned.
// Owns: the ChildProcess objects and their output. Must never: wait on a child without a timeout,
// or leave a child running after stopAll().
import { spawn, type ChildProcess } from 'node:child_process';

export interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class SupervisedChild {
  readonly name: string;
  readonly #child: ChildProcess;
  readonly #exited: Promise<ExitInfo>;
  readonly #watchers: { readonly pattern: RegExp; readonly resolve: (match: RegExpExecArray) => void }[] = [];
  #stdout = '';
  #tail: string[] = [];
  #exit: ExitInfo | undefined;

  constructor(
    name: string,
    command: string,
    args: readonly string[],
    env: NodeJS.ProcessEnv,
    forward: (line: string) => void,
  ) {
    this.name = name;
    // detached: a terminal's Ctrl-C reaches `up` only, which then stops the children in order.
    this.#child = spawn(command, [...args], { env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    const lines = (stream: NodeJS.ReadableStream | null, isStdout: boolean): void => {
      let partial = '';
      stream?.on('data', (chunk: Buffer) => {
        const text = partial + chunk.toString();
        const parts = text.split('\n');
        partial = parts.pop() ?? '';
        for (const line of parts) this.#line(line, isStdout, forward);
      });
    };
    lines(this.#child.stdout, true);
    lines(this.#child.stderr, false);
    this.#child.stdin?.on('error', () => undefined); // a child that died: nothing to tell it
    this.#exited = new Promise((resolve) => {
      this.#child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
      this.#child.once('error', () => {
        this.#exit ??= { code: 1, signal: null };
        resolve(this.#exit);
      });
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get exited(): Promise<ExitInfo> {
    return this.#exited;
  }

  get isRunning(): boolean {
    return this.#exit === undefined;
  }

  /** The last lines it wrote (for an error message). */
  get tail(): string {
    return this.#tail.join('\n');
  }

  /** The first stdout line matching pattern (past or future); rejects on exit or after timeoutMs. */
  waitFor(pattern: RegExp, what: string, timeoutMs: number): Promise<RegExpExecArray> {
    const past = pattern.exec(this.#stdout);
    if (past !== null) return Promise.resolve(past);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new Error(`${this.name} did not report ${what} within ${timeoutMs} ms; its last lines:\n${this.tail}`),
          ),
        timeoutMs,
      );
      this.#watchers.push({ pattern, resolve: (m) => (clearTimeout(timer), resolve(m)) });
      void this.#exited.then((e) => {
        clearTimeout(timer);
        reject(
          new Error(`${this.name} exited (${describeExit(e)}) before reporting ${what}; its last lines:\n${this.tail}`),
        );
      });
    });
  }

  /** SIGTERM, then SIGKILL after graceMs; resolves once it has exited. */
  async stop(graceMs: number): Promise<ExitInfo> {
    if (this.#exit !== undefined) return this.#exit;
    this.#child.kill('SIGTERM');
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
    const exit = await this.#exited;
    clearTimeout(timer);
    return exit;
  }

  /** Last resort (our own process is exiting): SIGKILL now. */
  killNow(): void {
    if (this.#exit === undefined) this.#child.kill('SIGKILL');
  }

  #line(line: string, isStdout: boolean, forward: (line: string) => void): void {
    this.#tail = [...this.#tail.slice(-19), line];
    if (isStdout) {
      this.#stdout += `${line}\n`;
      for (const w of [...this.#watchers]) {
        const match = w.pattern.exec(line);
        if (match === null) continue;
        this.#watchers.splice(this.#watchers.indexOf(w), 1);
        w.resolve(match);
      }
    }
    forward(`[${this.name}] ${line}`);
  }
}

export function describeExit(e: ExitInfo): string {
  return e.signal !== null ? `signal ${e.signal}` : `code ${e.code}`;
}
