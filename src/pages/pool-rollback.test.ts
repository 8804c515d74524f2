// PagePool.rollbackStamp / rollbackStamps: speculation's rollback of rejected positions, and the
// misuse it refuses (growing a stamp, another epoch, a page lent to the step in flight).
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, InvariantError, PageCheckError, type Tag } from '../core/index.js';
import { PagePool } from './pool.js';

const OWNER = { rid: asRequestId('r'), tenant: asTenantId('t') };

function setup(): { pool: PagePool; tags: readonly Tag[] } {
  const pool = PagePool.create({ numPages: 4, pageSize: 4, numLayers: 1, numKvHeads: 1, headDim: 1 });
  const result = pool.ledger.allocate(3, OWNER);
  if (result.kind !== 'allocated') throw new Error('pool too small');
  return { pool, tags: result.tags };
}

describe('PagePool.rollbackStamps', () => {
  it('rolls positions [keptEnd, writtenEnd) back: a read of them fails coverage, a read before them passes', () => {
    const { pool, tags } = setup();
    pool.stamp(tags[0]!, 4);
    pool.stamp(tags[1]!, 4);
    pool.stamp(tags[2]!, 2); // positions 0-9 written
    expect(pool.rollbackStamps(tags, 6, 10)).toBe(2); // keep 0-5
    expect(pool.stampOf(tags[1]!.page).filledSlots).toBe(2);
    expect(pool.stampOf(tags[2]!.page).filledSlots).toBe(0);
    expect(() => pool.checkRead(OWNER, tags, 6)).not.toThrow();
    expect(() => pool.checkRead(OWNER, tags, 7)).toThrow(PageCheckError);
    expect(() => pool.checkRead(OWNER, tags, 9)).toThrow(
      /page 1: expected a stamp of epoch \d+ covering 4 slot\(s\), found .* covering 2/,
    );
  });

  it('never grows a stamp, never touches another epoch, never a page lent to the step in flight', () => {
    const { pool, tags } = setup();
    pool.stamp(tags[0]!, 2);
    expect(() => pool.rollbackStamp(tags[0]!, 3)).toThrow(InvariantError);
    expect(() => pool.rollbackStamp({ page: tags[0]!.page, epoch: tags[1]!.epoch }, 0)).toThrow(InvariantError);
    pool.lend([tags[0]!.page]);
    expect(() => pool.rollbackStamp(tags[0]!, 1)).toThrow(/lent/);
    pool.unlend([tags[0]!.page]);
    pool.rollbackStamp(tags[0]!, 1);
    expect(pool.stampOf(tags[0]!.page).filledSlots).toBe(1);
  });
});
