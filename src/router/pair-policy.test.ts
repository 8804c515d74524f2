import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, samplingParams, type KvDtype } from '../core/index.js';
import type { ClientRequest } from '../transfer/index.js';
import { ALL_CHECKS, clusterAdmission, pickPair, type WorkerView } from './pair-policy.js';

const MODEL = 'a11ce5a11ce5a11c';
const limits = (
  contextLength: number,
  numPages: number,
  pageSize = 16,
  kvBytesPerToken = 2048,
  model = MODEL,
  kvDtype: KvDtype = 'f32',
) => ({
  contextLength,
  numPages,
  pageSize,
  kvBytesPerToken,
  kvDtype,
  model,
});
const worker = (address: string, role: 'prefill' | 'decode', over: Partial<WorkerView> = {}): WorkerView => ({
  url: `http://${address}`,
  role,
  address,
  up: true,
  limits: limits(512, 64),
  inFlight: 0,
  freePages: 64,
  ...over,
});
const request = (numPromptTokens: number, maxTokens: number): ClientRequest => ({
  rid: asRequestId('r'),
  tenant: asTenantId('t'),
  tokens: Array.from({ length: numPromptTokens }, (_, i) => i + 3),
  sampling: samplingParams({ maxTokens }),
});

describe('cluster admission', () => {
  it("refuses a prompt that fits decode but not any prefill, with the prefill's own reason", () => {
    const workers = [worker('p', 'prefill', { limits: limits(128, 8) }), worker('d', 'decode')];
    expect(clusterAdmission(150, 10, workers)).toMatchObject({
      code: 'context_length_exceeded',
      message: expect.stringMatching(/128 tokens/),
    });
    expect(clusterAdmission(100, 10, workers)).toBeUndefined();
  });

  it('refuses a prompt that fits prefill but not any decode (prompt + max_tokens on decode)', () => {
    const workers = [worker('p', 'prefill'), worker('d', 'decode', { limits: limits(128, 8) })];
    expect(clusterAdmission(100, 50, workers)).toMatchObject({ code: 'context_length_exceeded' });
    expect(clusterAdmission(100, 28, workers)).toBeUndefined();
  });

  it('judges workers that are down by what they last reported (they may come back), and none it never heard from', () => {
    expect(
      clusterAdmission(150, 10, [worker('p', 'prefill', { up: false, limits: limits(128, 8) }), worker('d', 'decode')]),
    ).toMatchObject({ code: 'context_length_exceeded' });
    expect(
      clusterAdmission(150, 10, [worker('p', 'prefill', { limits: undefined }), worker('d', 'decode')]),
    ).toBeUndefined();
  });

  it('says the cluster is misconfigured when no fitting pair shares a page geometry', () => {
    const workers = [worker('p', 'prefill', { limits: limits(512, 64, 32) }), worker('d', 'decode')];
    expect(clusterAdmission(10, 10, workers)).toMatchObject({ code: 'config_invalid' });
  });

  it('never pairs nodes whose KV dtype differs, even at equal bytes per token (misconfigured), and pairs the equal ones', () => {
    const f16 = limits(512, 64, 16, 2048, MODEL, 'f16');
    const workers = [worker('p', 'prefill', { limits: f16 }), worker('d', 'decode')];
    expect(clusterAdmission(10, 10, workers)).toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/KV dtype/),
    });
    expect(pickPair(request(10, 10), { prefills: [] }, workers)).toBeUndefined();
    const both = [...workers, worker('d16', 'decode', { limits: f16 })];
    expect(clusterAdmission(10, 10, both)).toBeUndefined();
    expect(pickPair(request(10, 10), { prefills: [] }, both)).toEqual({ prefill: 'p', decode: 'd16' });
  });

  it('says the cluster is misconfigured when no fitting pair serves the same model (by fingerprint), and not when one does', () => {
    const other = limits(512, 64, 16, 2048, 'b0bb1eb0bb1eb0bb');
    expect(clusterAdmission(10, 10, [worker('p', 'prefill', { limits: other }), worker('d', 'decode')])).toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/same model/),
    });
    expect(
      clusterAdmission(10, 10, [
        worker('p', 'prefill', { limits: other }),
        worker('d', 'decode'),
        worker('d2', 'decode', { limits: other }),
      ]),
    ).toBeUndefined();
  });
});

describe('a request under a LoRA adapter', () => {
  const A = { name: 'a', digest: 'a1'.repeat(16) };
  const serving = (adapters: Record<string, string>) => ({ limits: { ...limits(512, 64), adapters } });
  const under = { ...request(10, 10), adapter: A };

  it("goes only to a pair that both serve the adapter under the router's digest; base requests go anywhere", () => {
    const workers = [
      worker('p-none', 'prefill'),
      worker('p-other', 'prefill', serving({ a: 'b2'.repeat(16) })),
      worker('p-a', 'prefill', { ...serving({ a: A.digest }), inFlight: 5 }),
      worker('d-none', 'decode'),
      worker('d-a', 'decode', { ...serving({ a: A.digest }), inFlight: 5 }),
    ];
    expect(pickPair(under, { prefills: [] }, workers)).toEqual({ prefill: 'p-a', decode: 'd-a' });
    expect(pickPair(request(10, 10), { prefills: [] }, workers)).toEqual({ prefill: 'p-none', decode: 'd-none' });
    expect(clusterAdmission(10, 10, workers, ALL_CHECKS, A)).toBeUndefined();
  });

  it('is refused as a misconfiguration when no pair serves it (the flag named); skip-model-check lets it through', () => {
    const workers = [
      worker('p', 'prefill', serving({ a: A.digest })),
      worker('d', 'decode', serving({ a: 'b2'.repeat(16) })),
    ];
    expect(clusterAdmission(10, 10, workers, ALL_CHECKS, A)).toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/serves the LoRA adapter a with the router's digest a1a1.*--lora a=PATH/),
    });
    expect(pickPair(under, { prefills: [] }, workers)).toBeUndefined();
    const unchecked = { admission: true, model: false };
    expect(clusterAdmission(10, 10, workers, unchecked, A)).toBeUndefined();
    expect(pickPair(under, { prefills: [] }, workers, unchecked)).toEqual({ prefill: 'p', decode: 'd' });
  });
});

describe('pickPair', () => {
  it('takes the least loaded prefill and decode, then the one with most free pages, then the address', () => {
    const workers = [
      worker('p1', 'prefill', { inFlight: 2 }),
      worker('p2', 'prefill', { inFlight: 1, freePages: 10 }),
      worker('p3', 'prefill', { inFlight: 1, freePages: 20 }),
      worker('d1', 'decode', { inFlight: 0 }),
      worker('d2', 'decode', { inFlight: 0 }),
    ];
    expect(pickPair(request(10, 10), { prefills: [] }, workers)).toEqual({ prefill: 'p3', decode: 'd1' });
  });

  it('skips workers that are down, unknown, to be avoided (a failed prefill), or too small for the request', () => {
    const workers = [
      worker('p1', 'prefill', { up: false }),
      worker('p2', 'prefill'),
      worker('p3', 'prefill', { limits: limits(64, 4) }),
      worker('p4', 'prefill', { address: undefined }),
      worker('d1', 'decode', { limits: limits(64, 4) }),
      worker('d2', 'decode', { inFlight: 5 }),
    ];
    expect(pickPair(request(100, 10), { prefills: [] }, workers)).toEqual({ prefill: 'p2', decode: 'd2' });
    expect(pickPair(request(100, 10), { prefills: ['p2'] }, workers)).toBeUndefined();
    // skip-admission on the router: limits are not looked at here (each node still checks its own).
    expect(pickPair(request(100, 10), { prefills: ['p2'] }, workers, { admission: false, model: true })).toEqual({
      prefill: 'p3',
      decode: 'd1',
    });
  });

  it('pairs only pages of the same geometry', () => {
    const workers = [
      worker('p1', 'prefill', { limits: limits(512, 64, 32) }),
      worker('p2', 'prefill', { inFlight: 3 }),
      worker('d1', 'decode'),
    ];
    expect(pickPair(request(10, 10), { prefills: [] }, workers)).toEqual({ prefill: 'p2', decode: 'd1' });
  });

  it('pairs only workers serving the same model: a less loaded prefill of another model is passed over', () => {
    const workers = [
      worker('p1', 'prefill', { limits: limits(512, 64, 16, 2048, 'b0bb1eb0bb1eb0bb') }),
      worker('p2', 'prefill', { inFlight: 3 }),
      worker('d1', 'decode'),
    ];
    expect(pickPair(request(10, 10), { prefills: [] }, workers)).toEqual({ prefill: 'p2', decode: 'd1' });
    expect(pickPair(request(10, 10), { prefills: ['p2'] }, workers)).toBeUndefined();
    // skip-model-check on the router: fingerprints are not compared here (decode still compares KvDone's).
    expect(pickPair(request(10, 10), { prefills: [] }, workers, { admission: true, model: false })).toEqual({
      prefill: 'p1',
      decode: 'd1',
    });
  });
});
