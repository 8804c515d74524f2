import { describe, expect, it } from 'vitest';
import { clusterSecret, parsePdWorkerConfig, parseRole, parseWorkerUrl, timeoutsFromEnv } from './config-pd.js';

const SECRET = 'a-cluster-secret-of-32-bytes-0123';

describe('PD configuration', () => {
  it('parses the role; colocated by default', () => {
    expect(parseRole({})).toBe('colocated');
    expect(parseRole({ role: 'decode' })).toBe('decode');
    expect(() => parseRole({ role: 'router' })).toThrow(/--role must be colocated, prefill or decode/);
  });

  it('requires a cluster secret of at least 16 bytes, from the flag or the environment', () => {
    expect(clusterSecret(undefined, { TESSERA_CLUSTER_SECRET: SECRET })).toBe(SECRET);
    expect(clusterSecret(SECRET, { TESSERA_CLUSTER_SECRET: 'ignored-because-a-flag-wins' })).toBe(SECRET);
    expect(() => clusterSecret(undefined, {})).toThrow(/needs a shared secret/);
    expect(() => clusterSecret('short', {})).toThrow(/at least 16 bytes/);
  });

  it("binds the internal listener to loopback by default and refuses a wildcard (it is the worker's id)", () => {
    const config = parsePdWorkerConfig('prefill', {}, { TESSERA_CLUSTER_SECRET: SECRET });
    expect(config).toMatchObject({
      role: 'prefill',
      dataHost: '127.0.0.1',
      dataPort: 0,
      clusterSecret: SECRET,
      traceDir: null,
      supervised: false,
      timeouts: {},
    });
    expect(
      parsePdWorkerConfig(
        'decode',
        { dataPort: '9100' },
        { TESSERA_CLUSTER_SECRET: SECRET, TESSERA_SUPERVISED: '1', TESSERA_TRACE_DIR: '/tmp/t' },
      ),
    ).toMatchObject({ dataPort: 9100, supervised: true, traceDir: '/tmp/t' });
    expect(() => parsePdWorkerConfig('decode', { dataHost: '0.0.0.0' }, { TESSERA_CLUSTER_SECRET: SECRET })).toThrow(
      /--data-host/,
    );
    expect(() => parsePdWorkerConfig('decode', { dataPort: '70000' }, { TESSERA_CLUSTER_SECRET: SECRET })).toThrow(
      /--data-port/,
    );
  });

  it('reads protocol timeouts for tests, refusing names the protocol does not have', () => {
    expect(timeoutsFromEnv({ TESSERA_PD_TIMEOUTS: 'abortAckMs=300, abortRetries=0' })).toEqual({
      abortAckMs: 300,
      abortRetries: 0,
    });
    expect(timeoutsFromEnv({})).toEqual({});
    expect(() => timeoutsFromEnv({ TESSERA_PD_TIMEOUTS: 'abortAck=3' })).toThrow(/unknown wait "abortAck"/);
    expect(() => timeoutsFromEnv({ TESSERA_PD_TIMEOUTS: 'ackMs=0' })).toThrow(/ackMs/);
  });

  it('takes worker URLs as http(s)://host:port only', () => {
    expect(parseWorkerUrl('http://127.0.0.1:8101/', '--prefill')).toBe('http://127.0.0.1:8101');
    expect(() => parseWorkerUrl('127.0.0.1:8101', '--prefill')).toThrow(/--prefill must be a worker's URL/);
    expect(() => parseWorkerUrl('http://127.0.0.1:8101/v1', '--decode')).toThrow(/no path/);
  });
});
