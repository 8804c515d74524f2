// Channel authentication: both ends of a cluster connection prove they hold the cluster secret
// before any protocol message is accepted. Sans-IO: the transport feeds frames in, sends what
// comes out, and treats every AuthError as "close this connection".
// Owns: the handshake state, the proofs, their constant-time comparison.
// Must never: accept a message frame before the peer's proof verified, compare MACs with ===,
// accept a proof made for the other direction (reflection) or for other nonces (replay), or
// put the secret in an error message.
//
//   dialer                                  acceptor
//     Hello(nodeId_d, nonce_d)  ----->
//                               <-----  Hello(nodeId_a, nonce_a)         (both send at once)
//     Proof(mac_d)              ----->                                   (each after the other's Hello)
//                               <-----  Proof(mac_a)
//   mac_x = HMAC-SHA256(secret, "tessera-auth-v1" | role of x | id_d | id_a | nonce_d | nonce_a)
// Each side verifies the other's mac; the role label stops a proof being reflected back, the
// two fresh 32-byte nonces stop one being replayed on another connection. Authentication
// only: frames are not encrypted or MACed afterwards (internal ports bind to loopback by
// default; use a private network or a tunnel across hosts).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigError, TesseraError } from '../core/index.js';
import { encodeHandshake, type Frame } from './codec.js';

export class AuthError extends TesseraError {
  override name = 'AuthError' as const;
  constructor(message: string) {
    super('unauthorized', `cluster connection refused: ${message}`);
  }
}

export const isAuthError = (e: unknown): e is AuthError => e instanceof AuthError;

export const MIN_SECRET_BYTES = 16;
export const NONCE_BYTES = 32;

export type HandshakeRole = 'dialer' | 'acceptor';

export interface HandshakeOptions {
  readonly secret: string | Uint8Array;
  readonly nodeId: string;
  readonly role: HandshakeRole;
  /** 32 fresh random bytes (the transport draws them; randomness is an argument). */
  readonly nonce: Uint8Array;
  /** Dialer: the id it dialed; the acceptor must say the same in its Hello. */
  readonly expectPeer?: string;
}

export type HandshakeStep = { readonly send: readonly Uint8Array[]; readonly peer: string | undefined };

export function checkSecret(secret: string | Uint8Array): Uint8Array {
  const bytes = typeof secret === 'string' ? new TextEncoder().encode(secret) : secret;
  if (bytes.length < MIN_SECRET_BYTES)
    throw new ConfigError(
      `the cluster secret has ${bytes.length} bytes; it needs at least ${MIN_SECRET_BYTES} (tessera up makes one)`,
    );
  return bytes;
}

export class Handshake {
  readonly #secret: Uint8Array;
  readonly #nodeId: string;
  readonly #role: HandshakeRole;
  readonly #nonce: string;
  readonly #expectPeer: string | undefined;
  #peer: { readonly id: string; readonly nonce: string } | undefined;
  #verified = false;

  constructor(options: HandshakeOptions) {
    this.#secret = checkSecret(options.secret);
    if (options.nonce.length !== NONCE_BYTES)
      throw new ConfigError(`a handshake nonce has ${NONCE_BYTES} bytes, got ${options.nonce.length}`);
    this.#nodeId = options.nodeId;
    this.#role = options.role;
    this.#nonce = Buffer.from(options.nonce).toString('hex');
    this.#expectPeer = options.expectPeer;
  }

  /** The peer's id once its proof verified; until then undefined. */
  get peer(): string | undefined {
    return this.#verified ? this.#peer?.id : undefined;
  }

  /** Our Hello: send it as soon as the connection is up. */
  start(): Uint8Array {
    return encodeHandshake({ hello: { nodeId: this.#nodeId, nonce: this.#nonce } });
  }

  /** One frame from the peer during the handshake. Throws AuthError for anything out of place. */
  receive(frame: Frame): HandshakeStep {
    if (this.#verified) throw new AuthError('a handshake frame after the handshake');
    switch (frame.kind) {
      case 'message':
      case 'prefix':
        throw new AuthError(`a ${frame.message.type} message before the handshake completed`);
      case 'hello': {
        if (this.#peer !== undefined) throw new AuthError('a second Hello');
        const { nodeId, nonce } = frame.hello;
        if (this.#expectPeer !== undefined && nodeId !== this.#expectPeer)
          throw new AuthError(`dialed ${this.#expectPeer}, but the peer says it is ${nodeId}`);
        if (nonce === this.#nonce) throw new AuthError('the peer echoed our nonce');
        this.#peer = { id: nodeId, nonce };
        return { send: [encodeHandshake({ proof: { mac: this.#mac(this.#role) } })], peer: undefined };
      }
      case 'proof': {
        if (this.#peer === undefined) throw new AuthError('a Proof before the Hello');
        const expected = Buffer.from(this.#mac(this.#role === 'dialer' ? 'acceptor' : 'dialer'), 'hex');
        const actual = Buffer.from(frame.proof.mac, 'hex');
        if (actual.length !== expected.length || !timingSafeEqual(actual, expected))
          throw new AuthError(`${this.#peer.id} does not hold the cluster secret`);
        this.#verified = true;
        return { send: [], peer: this.#peer.id };
      }
      default:
        throw new AuthError('an unknown handshake frame');
    }
  }

  #mac(prover: HandshakeRole): string {
    const peer = this.#peer as { readonly id: string; readonly nonce: string };
    const [dialerId, acceptorId] = this.#role === 'dialer' ? [this.#nodeId, peer.id] : [peer.id, this.#nodeId];
    const [dialerNonce, acceptorNonce] =
      this.#role === 'dialer' ? [this.#nonce, peer.nonce] : [peer.nonce, this.#nonce];
    return createHmac('sha256', this.#secret)
      .update(['tessera-auth-v1', prover, dialerId, acceptorId, dialerNonce, acceptorNonce].join('\n'))
      .digest('hex');
  }
}
