import { describe, expect, it } from 'vitest';
import { DEFAULT_SPEC, DraftState } from './spec-lookup.js';
import { planDrafts } from './spec-plan.js';
import type { PageTable, SchedRequest } from './request-state.js';

/** A decoding request whose text repeats (prompt lookup always finds a draft), as far as planDrafts looks. */
function decoding(): SchedRequest {
  const tokens = Array.from({ length: 40 }, (_, i) => 10 + (i % 3));
  return {
    tokens,
    numPromptTokens: 30,
    maxTokens: 100,
    draft: new DraftState(DEFAULT_SPEC),
  } as unknown as SchedRequest;
}

function plan(numDecodes: number, numPrompting: number): number {
  const table: PageTable = { tags: [], numComputed: 39 };
  return planDrafts({
    speculation: DEFAULT_SPEC, // maxBatch 4
    decodes: Array.from({ length: numDecodes }, decoding),
    numPrompting,
    contextLength: 4096,
    budget: 256,
    tableOf: () => table,
    growUpTo: (_r, want) => want,
  }).size;
}

describe('planDrafts backs off when the batch is already large (spec-plan.ts)', () => {
  it('drafts for up to maxBatch decodes, none beyond', () => {
    expect(plan(1, 0)).toBe(1);
    expect(plan(4, 0)).toBe(4);
    expect(plan(5, 0)).toBe(0);
  });

  it('counts requests with prompt work (running prefills, waiting) as decodes: drafts would take their budget', () => {
    expect(plan(1, 3)).toBe(1);
    expect(plan(1, 4)).toBe(0);
    expect(plan(2, 15)).toBe(0);
  });
});
