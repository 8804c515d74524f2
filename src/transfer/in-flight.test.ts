// The machines' inFlight() views for the operator's page map: decode's transfers with their
// phase, pages and bytes, and its quarantined pages with why and whose AbortAck frees them.
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, FaultSet, samplingParams } from '../core/index.js';
import { makePool } from '../../test/sim/transfer/kit.js';
import { DecodeMachine } from './decode-machine.js';
import { promptDigest } from './digests.js';
import { LedgerDecodeHost } from './hosts.js';

const TOKENS = [5, 6, 7, 8, 9, 10];

function decode() {
  const faults = new FaultSet();
  const host = new LedgerDecodeHost({
    pool: makePool(8, faults),
    model: '5eed5eed5eed5eed',
    contextLength: 64,
    faults,
  });
  const m = new DecodeMachine({ node: 'd0', host, faults });
  m.handle(0, {
    kind: 'received',
    from: 'router',
    message: {
      type: 'Reserve',
      rid: asRequestId('r1'),
      tenant: asTenantId('acme'),
      promptTokens: TOKENS.length,
      promptDigest: promptDigest(TOKENS),
      sampling: samplingParams({ maxTokens: 4 }),
      prefillAddress: 'p0',
    },
  });
  return m;
}

describe('DecodeMachine.inFlight', () => {
  it('shows a reserved transfer waiting for its KV, with nothing quarantined', () => {
    expect(decode().inFlight()).toEqual({
      transfers: [{ rid: 'r1', tenant: 'acme', phase: 'AwaitingKv', peer: 'p0', numPages: 2, numTokens: 6, bytes: 0 }],
      quarantined: [],
    });
  });

  it("after the router's Abort: the pages are quarantined, with why, until the writer's AbortAck", () => {
    const m = decode();
    m.handle(1, { kind: 'connected', peer: 'p0' });
    m.handle(2, {
      kind: 'received',
      from: 'router',
      message: { type: 'Abort', rid: asRequestId('r1'), reason: 'client-disconnect' },
    });
    expect(m.inFlight()).toEqual({
      transfers: [{ rid: 'r1', tenant: 'acme', phase: 'Aborting', peer: 'p0', numPages: 2, numTokens: 6, bytes: 0 }],
      quarantined: [
        {
          rid: 'r1',
          tenant: 'acme',
          numPages: 2,
          reason: 'Abort from the router (client-disconnect)',
          waitingFor: 'p0',
        },
      ],
    });
    m.handle(3, { kind: 'received', from: 'p0', message: { type: 'AbortAck', rid: asRequestId('r1') } });
    expect(m.inFlight()).toEqual({ transfers: [], quarantined: [] });
  });
});
