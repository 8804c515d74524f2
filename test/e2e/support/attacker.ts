// Raw sockets as an attacker holds them against a real listener (HTTP or a cluster port): silent,
// trickling header lines, idle after a response. Each socket is tracked for the caller to end.
// Must never: send a byte it does not mean to (a silent socket writes nothing), or throw on a
// reset (a closed socket is an outcome, not an error).
import { connect, type Socket } from 'node:net';

/** Sockets opened here; `destroyAll` ends them. */
export class Attacker {
  readonly #sockets: Socket[] = [];

  /** A connection that sends nothing, from `localAddress` (any 127.x address is this host); resolves once connected. */
  silent(port: number, localAddress = '127.0.0.1'): Promise<Socket> {
    return new Promise<Socket>((resolve, reject) => {
      const s = connect({ host: '127.0.0.1', port, localAddress }, () => {
        s.off('error', reject);
        s.on('error', () => undefined);
        resolve(s);
      });
      s.once('error', reject);
      s.resume(); // read what the server sends (a cluster node's Hello), so its close is seen
      this.#sockets.push(s);
    });
  }

  /** `n` silent connections, opened `batch` at a time, from `localAddresses` in turn. */
  async flood(
    port: number,
    n: number,
    localAddresses: readonly string[] = ['127.0.0.1'],
    batch = 100,
  ): Promise<Socket[]> {
    const out: Socket[] = [];
    for (let i = 0; i < n; i += batch) {
      const count = Math.min(batch, n - i);
      out.push(
        ...(await Promise.all(
          Array.from({ length: count }, (_, j) =>
            this.silent(port, localAddresses[(i + j) % localAddresses.length] as string),
          ),
        )),
      );
    }
    return out;
  }

  /** A request line, then one header line every `everyMs`, never the blank line that ends the head. */
  async slowloris(port: number, everyMs: number): Promise<Socket> {
    const s = await this.silent(port);
    s.write('GET /health HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => {
      if (s.writable) s.write(`X-Slow-${Date.now()}: 1\r\n`);
    }, everyMs);
    s.once('close', () => clearInterval(trickle));
    return s;
  }

  /** A keep-alive connection that got one answer to GET /health and then stays silent. */
  async idleAfterResponse(port: number): Promise<Socket> {
    const s = await this.silent(port);
    const answered = new Promise((resolve) => s.once('data', resolve));
    s.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    await answered;
    return s;
  }

  /**
   * A silent socket, a slowloris (a header line every 300 ms) and a keep-alive idle after its
   * answer, all at once against `port`: how each ended within `watchMs` ('open', or 'closed' with
   * the answer's status and code when one came, e.g. 'closed 408 request_timeout').
   */
  async deadlines(port: number, watchMs: number): Promise<{ silent: string; slowloris: string; idle: string }> {
    const [silent, trickle, idle] = await Promise.all([
      this.silent(port),
      this.slowloris(port, 300),
      this.idleAfterResponse(port),
    ]);
    const [a, b, c] = await Promise.all([silent, trickle, idle].map((s) => outcome(s, watchMs)));
    const say = (o: { closed: boolean; text: string }): string =>
      o.closed ? `closed ${answerOf(o.text)}`.trim() : 'open';
    return { silent: say(a!), slowloris: say(b!), idle: say(c!) };
  }

  destroyAll(): void {
    for (const s of this.#sockets.splice(0)) s.destroy();
  }
}

/** What the server sent on `s` and whether it closed `s` within `watchMs` ('open' if not). */
export function outcome(s: Socket, watchMs: number): Promise<{ readonly closed: boolean; readonly text: string }> {
  let text = '';
  s.on('data', (d: Buffer) => (text += d.toString()));
  if (s.destroyed || s.readableEnded) return Promise.resolve({ closed: true, text });
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ closed: false, text }), watchMs);
    s.once('close', () => (clearTimeout(timer), resolve({ closed: true, text })));
  });
}

/** The status and error code of a raw HTTP answer, e.g. "408 request_timeout"; "" for none. */
export function answerOf(text: string): string {
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
  if (status === undefined) return '';
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  try {
    return `${status} ${(JSON.parse(body) as { error?: { code?: string } }).error?.code ?? ''}`;
  } catch {
    return status;
  }
}
