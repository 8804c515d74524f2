// Protocol traces to a file (TESSERA_TRACE_DIR): one JSON object per line, each written at once
// (writeSync), so a process killed with -9 leaves every event it emitted before dying.
//   {"t": <ms since the epoch, sub-ms>, "e": TraceEvent}          an event of this process
//   {"t": ..., "writer": {"rid": "...", "prefill": "host:port"}}  the router's Reserve named the writer
// Merging the files of a cluster by `t` gives a trace where every recv follows its send (the
// clocks of processes on one host agree to far better than a loopback round trip).
// Must never: buffer an event, or be switched on outside tests and diagnosis (it costs a syscall
// per event).
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { TraceEvent, TraceSink } from '../transfer/index.js';

export class TraceFile implements TraceSink {
  readonly path: string;
  readonly #fd: number;

  /** <dir>/<name>-<pid>.jsonl, appended to. */
  constructor(dir: string, name: string) {
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, `${name}-${process.pid}.jsonl`);
    this.#fd = openSync(this.path, 'a');
  }

  emit(event: TraceEvent): void {
    this.#line({ t: now(), e: event });
  }

  writer(rid: string, prefill: string): void {
    this.#line({ t: now(), writer: { rid, prefill } });
  }

  close(): void {
    closeSync(this.#fd);
  }

  #line(value: unknown): void {
    writeSync(this.#fd, `${JSON.stringify(value)}\n`);
  }
}

function now(): number {
  return performance.timeOrigin + performance.now();
}
