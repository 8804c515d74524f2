import { describe, expect, it } from 'vitest';
import { asRequestId, isConfigError } from '../core/index.js';
import { Handshake, isAuthError, type HandshakeOptions } from './auth.js';
import { decodeAnyFrame, encodeFrame } from './codec.js';

const SECRET = 'a-cluster-secret-of-32-bytes!!!!';
const nonce = (b: number) => new Uint8Array(32).fill(b);

/** Runs a handshake between two sides over perfect pipes; returns each side's verified peer or its error. */
function handshake(dialer: Partial<HandshakeOptions>, acceptor: Partial<HandshakeOptions>) {
  const d = new Handshake({
    secret: SECRET,
    nodeId: 'router',
    role: 'dialer',
    nonce: nonce(1),
    expectPeer: 'd0',
    ...dialer,
  });
  const a = new Handshake({ secret: SECRET, nodeId: 'd0', role: 'acceptor', nonce: nonce(2), ...acceptor });
  const toA = [d.start()];
  const toD = [a.start()];
  const result: { dialer?: string | Error; acceptor?: string | Error } = {};
  const feed = (h: Handshake, inbox: Uint8Array[], outbox: Uint8Array[], side: 'dialer' | 'acceptor') => {
    while (inbox.length > 0 && result[side] === undefined) {
      try {
        const step = h.receive(decodeAnyFrame(inbox.shift() as Uint8Array));
        outbox.push(...step.send);
        if (step.peer !== undefined) result[side] = step.peer;
      } catch (error) {
        result[side] = error as Error;
      }
    }
  };
  for (let i = 0; i < 4; i++) {
    feed(a, toA, toD, 'acceptor');
    feed(d, toD, toA, 'dialer');
  }
  return result;
}

describe('channel authentication', () => {
  it('both sides prove the shared secret and learn who the other is', () => {
    expect(handshake({}, {})).toEqual({ dialer: 'd0', acceptor: 'router' });
  });

  it('refuses a peer with another secret, on both sides, without naming the secret', () => {
    const r = handshake({}, { secret: 'another-secret-of-enough-bytes!!' });
    expect(isAuthError(r.dialer)).toBe(true);
    expect(isAuthError(r.acceptor)).toBe(true);
    expect((r.dialer as Error).message).toMatch(/d0 does not hold the cluster secret/);
    expect((r.dialer as Error).message).not.toContain(SECRET);
  });

  it('refuses a peer that is not the one dialed', () => {
    const r = handshake({ expectPeer: 'd1' }, {});
    expect((r.dialer as Error).message).toMatch(/dialed d1, but the peer says it is d0/);
  });

  it('refuses a message before the handshake, a proof before a hello, an echoed nonce', () => {
    const a = () => new Handshake({ secret: SECRET, nodeId: 'd0', role: 'acceptor', nonce: nonce(2) });
    expect(() => a().receive(decodeAnyFrame(encodeFrame({ type: 'Ack', rid: asRequestId('r') })))).toThrow(
      /Ack message before the handshake/,
    );
    const proof = handshake({}, {}); // a valid run, for shape only
    expect(proof.dialer).toBe('d0');
    const h = a();
    expect(() => h.receive({ kind: 'proof', proof: { mac: '0'.repeat(64) } })).toThrow(/Proof before the Hello/);
    expect(() => a().receive({ kind: 'hello', hello: { nodeId: 'x', nonce: '02'.repeat(32) } })).toThrow(
      /echoed our nonce/,
    );
  });

  it('refuses a reflected proof: the peer sending back our own proof', () => {
    const d = new Handshake({ secret: SECRET, nodeId: 'router', role: 'dialer', nonce: nonce(1) });
    d.start();
    // An attacker without the secret answers with the dialer's own nonce-swapped Hello, then reflects the dialer's proof.
    const out = d.receive({ kind: 'hello', hello: { nodeId: 'router', nonce: '03'.repeat(32) } });
    const reflected = decodeAnyFrame(out.send[0] as Uint8Array);
    expect(() => d.receive(reflected)).toThrow(/does not hold the cluster secret/);
  });

  it('refuses to start with a short secret', () => {
    expect(() => new Handshake({ secret: 'short', nodeId: 'n', role: 'dialer', nonce: nonce(1) })).toThrow(
      /at least 16/,
    );
    try {
      new Handshake({ secret: 'short', nodeId: 'n', role: 'dialer', nonce: nonce(1) });
    } catch (error) {
      expect(isConfigError(error)).toBe(true);
    }
  });
});
