// The KV dtype in what every tier beyond the pool keys by (disk tier, peers): pools of each of
// KV_DTYPES, same model, tenant and geometry, get distinct namespaces, so a page one dtype spilled
// (a q8_0 page's bytes are blocks, not halves or floats) is never loaded into a pool of another;
// and a q8_0 pool's page is 1.0625 bytes a value, as `tessera plan` counts it.
import { describe, expect, it } from 'vitest';
import { asTenantId, KV_DTYPES, kvBytesPerElement } from '../core/index.js';
import { kvBytesPerPage } from './arithmetic.js';
import { PagePool } from './pool.js';
import { poolNamespace } from './spill-tier.js';

const GEOMETRY = { numPages: 2, pageSize: 16, numLayers: 3, numKvHeads: 2, headDim: 64 };

describe('KV dtype in the spill namespace and the page size', () => {
  it('gives each KV dtype its own namespace for the same model, tenant and geometry', () => {
    const namespaces = KV_DTYPES.map((dtype) =>
      poolNamespace(PagePool.create({ ...GEOMETRY, dtype }), 'builtin:tiny', asTenantId('t')),
    );
    expect(new Set(namespaces).size).toBe(KV_DTYPES.length);
  });

  it("stores a q8_0 page in the bytes `tessera plan` counts: 1.0625 a value, 34/128 of f32's", () => {
    const f32 = PagePool.create({ ...GEOMETRY, dtype: 'f32' });
    const q8 = PagePool.create({ ...GEOMETRY, dtype: 'q8_0' });
    expect(q8.slotRangeBytes(GEOMETRY.pageSize) * 128).toBe(f32.slotRangeBytes(GEOMETRY.pageSize) * 34);
    const planned = kvBytesPerPage({ ...GEOMETRY, bytesPerElement: kvBytesPerElement('q8_0', 64) }, 16);
    expect(q8.slotRangeBytes(GEOMETRY.pageSize)).toBe(planned);
    expect(q8.kv.data.byteLength).toBe(2 * planned);
  });
});
