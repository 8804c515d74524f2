// Server-sent events for streamed completions. The 200 status line is held back until the
// caller calls start() (on the first token, or on a finish with none), so a request that fails
// before its first token still gets its real status. Must never write `[DONE]` after an error.
import type { ServerResponse } from 'node:http';
import { errorBody, type Problem } from './errors.js';

export class SseStream {
  readonly #res: ServerResponse;

  constructor(res: ServerResponse) {
    this.#res = res;
  }

  /** True once the 200 and SSE headers are out: from then on a failure is an SSE error event. */
  get started(): boolean {
    return this.#res.headersSent;
  }

  start(): void {
    if (this.#res.headersSent) return;
    this.#res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // Headers go out now, not with the first data write (clients see the stream begin).
    this.#res.flushHeaders();
  }

  /** One `data: {...}` event. Waits while the client is slow to read (or until it is gone). */
  async send(event: object): Promise<void> {
    await this.#write(`data: ${JSON.stringify(event)}\n\n`);
  }

  /** One named event (`event: NAME` then `data: {...}`), as the Responses API streams them. */
  async sendNamed(name: string, event: object): Promise<void> {
    await this.#write(`event: ${name}\ndata: ${JSON.stringify(event)}\n\n`);
  }

  /** The end of a stream that has no [DONE] marker (the Responses API's). */
  end(): void {
    if (!this.#res.writableEnded) this.#res.end();
  }

  async done(): Promise<void> {
    await this.#write('data: [DONE]\n\n');
    this.#res.end();
  }

  /** A failure after the stream started: an error event in OpenAI's shape, then the end. No [DONE]. */
  async fail(p: Problem): Promise<void> {
    await this.#write(`data: ${JSON.stringify(errorBody(p))}\n\n`);
    this.#res.end();
  }

  async #write(text: string): Promise<void> {
    const res = this.#res;
    if (res.destroyed || res.writableEnded) return;
    if (res.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
}
