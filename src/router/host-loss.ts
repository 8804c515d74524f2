// Host loss: telling a worker whose host is gone from the network (its link down, powered off:
// no packet comes back, no connection is closed) from one that is only slow (its event loop
// inside a long step: the kernel still completes TCP handshakes for it). When the registry marks
// an up worker down, the router dials its cluster port; a host that does not complete the TCP
// handshake within timeoutMs is lost, and the router closes its connection to it, so every
// attempt on it ends through the protocol at once (retried on another pair before the first
// token, else an honest error) instead of waiting out the protocol's long timeouts. Its peers
// release what they hold by the protocol's own rules (decode: the writer's AbortAck or the
// writer declared dead after abortAckMs x (1 + abortRetries); prefill: Ack or ackMs).
// Detection bound with the router's defaults: MAX_SLOW_POLLS polls of fetchTimeoutMs each (the
// poll interval is shorter than the timeout), plus timeoutMs: 3 x 2 s + 1 s = 7 s, plus one
// poll interval (1 s) of phase: at most about 8 s.
// Must never: cut the connection of a host that completes the handshake (a slow worker keeps its
// requests), or throw.
import { connect } from 'node:net';
import { parseAddress } from '../transfer/index.js';

/** Resolves true once a TCP connection to address completes (then closed), false on error or after timeoutMs. */
export function tcpReachable(address: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let host: string;
    let port: number;
    try {
      ({ host, port } = parseAddress(address));
    } catch {
      resolve(false);
      return;
    }
    const socket = connect({ host, port });
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export const HOST_PROBE_TIMEOUT_MS = 1000;
