// A one-shot check that a cluster address answers with the cluster secret: dial it, run the
// authentication handshake as a dialer (auth.ts), and close at once, before any message. The
// router vets a worker that joins by DNS this way before it pairs it (router/discovery.ts).
// Owns: one probe connection and its timeout. Must never: send a protocol message, use the
// id of a node that has a real connection to the peer (the peer would replace that connection),
// or throw (every failure is the resolved reason).
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { NO_FAULTS } from '../../core/index.js';
import { NONCE_BYTES } from '../auth.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../codec.js';
import { Connection } from './connection.js';
import { parseAddress, socketPipe } from './tcp.js';

/** Resolves undefined once `address` proved the secret, else why not (refused, wrong secret, timeout). */
export function probeClusterSecret(
  address: string,
  probeId: string,
  secret: string | Uint8Array,
  timeoutMs: number,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (why: string | undefined): void => {
      if (settled) return;
      settled = true;
      resolve(why);
    };
    let host: string;
    let port: number;
    try {
      ({ host, port } = parseAddress(address));
    } catch (error) {
      settle((error as Error).message);
      return;
    }
    const connection = new Connection(socketPipe(connect({ host, port })), {
      role: 'dialer',
      nodeId: probeId,
      secret,
      nonce: randomBytes(NONCE_BYTES),
      expectPeer: address,
      maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
      handshakeTimeoutMs: timeoutMs,
      faults: NO_FAULTS,
      onAuthenticated: (c) => {
        settle(undefined);
        c.close('probe done');
      },
      onMessage: (c) => c.close('a probe takes no message'),
      onClosed: (_c, reason) => settle(`cluster address ${address}: ${reason}`),
    });
    void connection;
  });
}
