import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { asEpoch, asPageId, asRequestId } from '../core/index.js';
import { ChunkHasher, chunkChecksum, type ChunkHeader } from './digests.js';

const header: ChunkHeader = {
  rid: asRequestId('r1'),
  seq: 3,
  tag: { page: asPageId(2), epoch: asEpoch(9) },
  firstSlot: 4,
  numSlots: 2,
  kvDtype: 'f32' as const,
};

describe('ChunkHasher: a chunk checksum over a payload fed in pieces', () => {
  it('equals chunkChecksum of the whole payload, whatever the pieces', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 2000 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (payload, rawCuts) => {
          const points = [0, ...rawCuts.map((c) => c % payload.length).sort((a, b) => a - b), payload.length];
          const hasher = new ChunkHasher(header);
          for (let i = 1; i < points.length; i++) hasher.update(payload.subarray(points[i - 1], points[i]));
          expect(hasher.hex()).toBe(chunkChecksum(header, payload));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('is seeded by the header: the same payload under another header hashes differently', () => {
    const payload = new Uint8Array(64).fill(7);
    const hasher = new ChunkHasher({ ...header, seq: 4 });
    hasher.update(payload);
    expect(hasher.hex()).not.toBe(chunkChecksum(header, payload));
    expect(hasher.hex()).toBe(chunkChecksum({ ...header, seq: 4 }, payload));
  });
});
