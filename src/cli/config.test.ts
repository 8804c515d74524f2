// argv and environment -> ServeConfig; the pool arithmetic and the start-up check's message.
import { describe, expect, it } from 'vitest';
import { isConfigError } from '../core/index.js';
import { parseApiKeys } from './config-api-keys.js';
import { faultsFromEnv, tesseraHome } from './config-env.js';
import { planPool, startupCheckError } from './config-pool.js';
import { parseSize } from './config-values.js';
import { DEFAULT_KV_DTYPE, DEFAULT_MODEL, parseServeConfig } from './config.js';

const tiny = { numLayers: 4, numKvHeads: 2, headDim: 32, maxPositionEmbeddings: 4096, slidingWindow: null };

function configError(f: () => unknown): string {
  try {
    f();
  } catch (error) {
    if (isConfigError(error)) return error.message;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('parseServeConfig', () => {
  it('has defaults for everything', () => {
    const c = parseServeConfig({}, { TESSERA_HOME: '/h' });
    expect(c).toMatchObject({
      model: DEFAULT_MODEL,
      servedModelName: DEFAULT_MODEL,
      host: '127.0.0.1',
      port: 8000,
      deterministic: false,
      kernels: 'auto',
      home: '/h',
      checkEveryStep: false,
    });
    expect(c.pool).toEqual({ size: { kind: 'default' }, pageSize: 16, kvDtype: DEFAULT_KV_DTYPE, contextLength: null });
    expect(c.faults.size).toBe(0);
  });

  it('reads every flag', () => {
    const c = parseServeConfig(
      {
        model: '/m',
        servedModelName: 'm',
        host: '0.0.0.0',
        port: '0',
        contextLength: '1024',
        kvMemory: '64MiB',
        pageSize: '32',
        kvDtype: 'f16',
        maxRunningRequests: '8',
        chunkedPrefillSize: '64',
        apiKeys: 'k.json',
        deterministic: true,
        kernels: 'wasm',
      },
      { TESSERA_CHECK_EVERY_STEP: '1' },
    );
    expect(c).toMatchObject({
      model: '/m',
      servedModelName: 'm',
      host: '0.0.0.0',
      port: 0,
      maxRunningRequests: 8,
      chunkedPrefillSize: 64,
      apiKeysFile: 'k.json',
      deterministic: true,
      kernels: 'wasm',
      checkEveryStep: true,
    });
    expect(c.pool).toEqual({
      size: { kind: 'memory', bytes: 64 * 1024 ** 2 },
      pageSize: 32,
      kvDtype: 'f16',
      contextLength: 1024,
    });
  });

  it('refuses bad values, naming the flag', () => {
    expect(configError(() => parseServeConfig({ port: '80x' }, {}))).toMatch(/--port must be a whole number/);
    expect(configError(() => parseServeConfig({ kvDtype: 'bf16' }, {}))).toBe(
      "--kv-dtype must be one of f32, f16, q8_0, got 'bf16'",
    );
    expect(configError(() => parseServeConfig({ kernels: 'ort' }, {}))).toBe(
      "--kernels must be one of auto, native, wasm, ref, got 'ort'",
    );
    expect(configError(() => parseServeConfig({ port: '70000' }, {}))).toMatch(/--port must be between 0 and 65535/);
    expect(configError(() => parseServeConfig({ kvPages: '0' }, {}))).toMatch(/--kv-pages/);
    expect(configError(() => parseServeConfig({ kvPages: '4', kvMemory: '1GiB' }, {}))).toMatch(
      /either --kv-pages or --kv-memory/,
    );
    expect(configError(() => parseServeConfig({ maxRunningRequests: '64', chunkedPrefillSize: '32' }, {}))).toMatch(
      /at least --max-running-requests/,
    );
  });
});

describe('environment', () => {
  it('arms fault points only with TESSERA_ALLOW_FAULTS=1, and refuses unknown names', () => {
    expect(faultsFromEnv({}).size).toBe(0);
    expect(
      faultsFromEnv({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-startup-check, swap-batch-rows' }).names(),
    ).toEqual(['skip-startup-check', 'swap-batch-rows']);
    expect(configError(() => faultsFromEnv({ TESSERA_FAULT: 'skip-startup-check' }))).toMatch(
      /not armed.*TESSERA_ALLOW_FAULTS=1/,
    );
    expect(configError(() => faultsFromEnv({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'no-such-fault' }))).toMatch(
      /unknown fault point "no-such-fault"/,
    );
  });

  it("reads forced-answer's sequences from TESSERA_FORCED_TOKENS, and refuses them malformed", () => {
    const armed = { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'forced-answer' };
    const faults = faultsFromEnv({ ...armed, TESSERA_FORCED_TOKENS: '[[5, 6], [7]]' });
    expect([faults.forcedToken(0, 0), faults.forcedToken(0, 1), faults.forcedToken(0, 2)]).toEqual([5, 6, undefined]);
    expect([faults.forcedToken(1, 0), faults.forcedToken(2, 0)]).toEqual([7, undefined]);
    // Without the fault point the sequences are not read, and nothing is forced.
    expect(faultsFromEnv({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'skip-startup-check' }).forcedToken(0, 0)).toBe(
      undefined,
    );
    for (const bad of [undefined, 'nope', '[1, 2]', '[[1.5]]', '[[-1]]'])
      expect(
        configError(() => faultsFromEnv({ ...armed, ...(bad === undefined ? {} : { TESSERA_FORCED_TOKENS: bad }) })),
      ).toMatch(/forced-answer needs TESSERA_FORCED_TOKENS/);
  });

  it('puts the model cache in TESSERA_HOME, else under the user cache directory', () => {
    expect(tesseraHome({ TESSERA_HOME: '/x' }, '/home/u')).toBe('/x');
    expect(tesseraHome({ XDG_CACHE_HOME: '/c' }, '/home/u')).toBe('/c/tessera');
    expect(tesseraHome({}, '/home/u')).toBe('/home/u/.cache/tessera');
  });
});

describe('parseSize', () => {
  it('reads decimal and binary units', () => {
    expect(parseSize('1GiB', 'f')).toBe(1024 ** 3);
    expect(parseSize('1.5 MiB', 'f')).toBe(1.5 * 1024 ** 2);
    expect(parseSize('2GB', 'f')).toBe(2e9);
    expect(parseSize('4096', 'f')).toBe(4096);
    expect(configError(() => parseSize('lots', '--kv-memory'))).toMatch(/--kv-memory must be a size/);
  });
});

describe('--api-keys', () => {
  it('maps keys to tenants', () => {
    expect([...parseApiKeys('{"k1":"alice","k2":"alice","k3":"bob"}', 'f')]).toEqual([
      ['k1', 'alice'],
      ['k2', 'alice'],
      ['k3', 'bob'],
    ]);
  });

  it('refuses a bad file without echoing a key', () => {
    expect(configError(() => parseApiKeys('{', 'keys.json'))).toMatch(/keys.json: not valid JSON/);
    expect(configError(() => parseApiKeys('["k"]', 'f'))).toMatch(/not a JSON object/);
    expect(configError(() => parseApiKeys('{}', 'f'))).toMatch(/no keys/);
    const message = configError(() => parseApiKeys('{"secret-key": 7}', 'f'));
    expect(message).toMatch(/tenant of key #1/);
    expect(message).not.toContain('secret-key');
  });
});

describe('the pool and the start-up check', () => {
  it('does the arithmetic: 2 x 2 heads x 32 x 4 B = 512 B per token per layer, 2 KiB per token, 32 KiB per page', () => {
    const plan = planPool(tiny, {
      size: { kind: 'memory', bytes: 4 * 1024 ** 2 + 100 },
      pageSize: 16,
      kvDtype: 'f32',
      contextLength: null,
    });
    expect(plan).toMatchObject({
      bytesPerTokenPerLayer: 512,
      bytesPerToken: 2048,
      bytesPerPage: 32768,
      numPages: 128,
      poolTokens: 2048,
      contextLength: 4096,
      contextPages: 256,
    });
  });

  it('speaks in the KV dtype: f16 halves the bytes per token and page and doubles the tokens in the same memory', () => {
    const flags = { size: { kind: 'memory', bytes: 4 * 1024 ** 2 + 100 }, pageSize: 16, contextLength: null } as const;
    const f32 = planPool(tiny, { ...flags, kvDtype: 'f32' });
    const f16 = planPool(tiny, { ...flags, kvDtype: 'f16' });
    expect(f16).toMatchObject({ kvDtype: 'f16', bytesPerTokenPerLayer: 256, bytesPerToken: 1024, bytesPerPage: 16384 });
    expect(f16.poolTokens).toBe(2 * f32.poolTokens);
    expect(f16.numPages).toBe(256);
  });

  it('sizes the default pool for four full-length requests', () => {
    expect(
      planPool(tiny, { size: { kind: 'default' }, pageSize: 16, kvDtype: 'f32', contextLength: 1000 }).numPages,
    ).toBe(4 * 63);
  });

  it('lets a pool that holds the context length start, exactly at the boundary', () => {
    expect(
      startupCheckError(
        planPool(tiny, { size: { kind: 'pages', numPages: 64 }, pageSize: 16, kvDtype: 'f32', contextLength: 1024 }),
      ),
    ).toBeUndefined();
  });

  it('refuses a context one token longer than the pool, with both numbers in tokens and the fix', () => {
    const byPages = startupCheckError(
      planPool(tiny, { size: { kind: 'pages', numPages: 64 }, pageSize: 16, kvDtype: 'f32', contextLength: 1025 }),
    );
    expect(byPages?.message).toBe(
      'context length 1025 tokens does not fit the KV pool: 1024 tokens (64 pages of 16). Raise --kv-pages to at least 65 or lower --context-length to at most 1024.',
    );
    const byMemory = startupCheckError(
      planPool(tiny, {
        size: { kind: 'memory', bytes: 4 * 1024 ** 2 },
        pageSize: 16,
        kvDtype: 'f32',
        contextLength: null,
      }),
    );
    expect(byMemory?.message).toBe(
      'context length 4096 tokens does not fit the KV pool: 2048 tokens (128 pages of 16). Raise --kv-memory to at least 8MiB or lower --context-length to at most 2048.',
    );
  });

  it('refuses a context longer than the model was built for, and a pool of no page', () => {
    expect(
      configError(() =>
        planPool(tiny, { size: { kind: 'default' }, pageSize: 16, kvDtype: 'f32', contextLength: 5000 }),
      ),
    ).toMatch(/exceeds the model's max_position_embeddings \(4096\)/);
    expect(
      configError(() =>
        planPool(tiny, { size: { kind: 'memory', bytes: 1000 }, pageSize: 16, kvDtype: 'f32', contextLength: null }),
      ),
    ).toMatch(/would hold no page/);
    const windowed = { ...tiny, slidingWindow: 1024 };
    expect(
      planPool(windowed, { size: { kind: 'default' }, pageSize: 16, kvDtype: 'f32', contextLength: null })
        .contextLength,
    ).toBe(1024);
    expect(
      configError(() =>
        planPool(windowed, { size: { kind: 'default' }, pageSize: 16, kvDtype: 'f32', contextLength: 2048 }),
      ),
    ).toMatch(/sliding window \(1024 tokens\)/);
  });
});

describe('--max-step-ms', () => {
  it('is auto by default, and takes off or a whole number of milliseconds', () => {
    expect(parseServeConfig({}, { TESSERA_HOME: '/h' }).maxStepMs).toBe('auto');
    expect(parseServeConfig({ maxStepMs: 'off' }, { TESSERA_HOME: '/h' }).maxStepMs).toBe('off');
    expect(parseServeConfig({ maxStepMs: '80' }, { TESSERA_HOME: '/h' }).maxStepMs).toBe(80);
  });

  it('refuses anything else, naming the flag', () => {
    for (const bad of ['0', 'fast', '-5', '1.5'])
      expect(configError(() => parseServeConfig({ maxStepMs: bad }, {}))).toMatch(/--max-step-ms/);
  });
});
