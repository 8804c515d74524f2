// /metrics: back-end gauges at scrape time (one kv_pages series per ledger state), outcomes,
// latency histograms measured with the injected clock, a registry per server, the PD hook.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pdMetrics } from './metrics-pd.js';
import { FakeBackend, FakeClock, wordScript } from '../testing/fake-backend.js';
import { send, seriesValue, startTestServer, type TestServer } from '../testing/harness.js';

let t: TestServer;
const clock = new FakeClock();

beforeAll(async () => {
  const backend = new FakeBackend();
  // First token 100 ms after arrival, then one every 20 ms.
  backend.script = wordScript({ beforeToken: (i) => clock.advance(i === 0 ? 100 : 20) });
  backend.statsSnapshot = {
    kvPages: { free: 7, allocated: 2, cached: 1, quarantined: 3 },
    requestsRunning: 2,
    requestsWaiting: 5,
    tagMismatchesTotal: 4,
  };
  t = await startTestServer({
    backend,
    clock,
    metricsHooks: [(registry) => pdMetrics(registry).addTransferBytes(4096)],
  });
});
afterAll(() => t.close());

const scrape = async (url: string): Promise<string> => (await send(url, 'GET', '/metrics')).text;
describe('GET /metrics', () => {
  it('publishes one kv_pages series per ledger state, running/waiting and tag mismatches from the back end', async () => {
    const r = await send(t.url, 'GET', '/metrics');
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = r.text;
    expect(seriesValue(text, 'tessera_kv_pages{state="free"}')).toBe(7);
    expect(seriesValue(text, 'tessera_kv_pages{state="allocated"}')).toBe(2);
    expect(seriesValue(text, 'tessera_kv_pages{state="cached"}')).toBe(1);
    expect(seriesValue(text, 'tessera_kv_pages{state="quarantined"}')).toBe(3);
    expect(seriesValue(text, 'tessera_requests_running')).toBe(2);
    expect(seriesValue(text, 'tessera_requests_waiting')).toBe(5);
    expect(seriesValue(text, 'tessera_kv_tag_mismatches_total')).toBe(4);
    t.backend.statsSnapshot = { ...t.backend.statsSnapshot, tagMismatchesTotal: 6 };
    expect(seriesValue(await scrape(t.url), 'tessera_kv_tag_mismatches_total')).toBe(6);
  });

  it('counts outcomes and observes TTFT, inter-token and end-to-end latency on the injected clock', async () => {
    expect((await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 4, stream: true })).status).toBe(
      200,
    );
    expect((await send(t.url, 'POST', '/v1/completions', { prompt: 'Hi', max_tokens: 999 })).status).toBe(400);
    const text = await scrape(t.url);
    expect(seriesValue(text, 'tessera_requests_total{outcome="success"}')).toBe(1);
    expect(seriesValue(text, 'tessera_requests_total{outcome="context_length_exceeded"}')).toBe(1);
    expect(seriesValue(text, 'tessera_requests_total{outcome="aborted"}')).toBe(0);
    expect(seriesValue(text, 'tessera_time_to_first_token_seconds_count')).toBe(1);
    expect(seriesValue(text, 'tessera_time_to_first_token_seconds_sum')).toBeCloseTo(0.1, 9);
    expect(seriesValue(text, 'tessera_inter_token_latency_seconds_count')).toBe(3);
    expect(seriesValue(text, 'tessera_inter_token_latency_seconds_sum')).toBeCloseTo(0.06, 9);
    expect(seriesValue(text, 'tessera_e2e_request_latency_seconds_count')).toBe(1);
    expect(seriesValue(text, 'tessera_e2e_request_latency_seconds_sum')).toBeCloseTo(0.16, 9);
  });

  it('adds the PD router series through the hook', async () => {
    const text = await scrape(t.url);
    expect(seriesValue(text, 'tessera_kv_transfer_bytes_total')).toBe(4096);
    expect(seriesValue(text, 'tessera_kv_transfer_checksum_failures_total')).toBe(0);
    expect(text).toContain('# TYPE tessera_kv_transfer_seconds histogram');
  });

  it('keeps a registry per server: another server counts only its own requests', async () => {
    const other = await startTestServer();
    try {
      expect(seriesValue(await scrape(other.url), 'tessera_requests_total{outcome="success"}')).toBe(0);
      expect(await scrape(other.url)).not.toContain('tessera_kv_transfer_bytes_total');
    } finally {
      await other.close();
    }
  });
});
