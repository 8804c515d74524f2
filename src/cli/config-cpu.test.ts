import { afterAll, describe, expect, it } from 'vitest';
import { isConfigError } from '../core/index.js';
import { nativeVariant, nativeVariantsHere, selectNativeVariant } from '../kernels/index.js';
import { applyCpuChoice, parseCpuChoice } from './config-cpu.js';
import { runMain } from './testing/run-main.js';

describe('--cpu / TESSERA_CPU', () => {
  afterAll(() => {
    if (nativeVariantsHere().length > 0) selectNativeVariant('auto');
  });

  it('takes the flag over TESSERA_CPU over auto, and refuses an unknown name', () => {
    expect(parseCpuChoice(undefined, {})).toBe('auto');
    expect(parseCpuChoice(undefined, { TESSERA_CPU: 'avx2' })).toBe('avx2');
    expect(parseCpuChoice('avx512', { TESSERA_CPU: 'avx2' })).toBe('avx512');
    let error: unknown;
    try {
      parseCpuChoice(undefined, { TESSERA_CPU: 'sse2' });
    } catch (e) {
      error = e;
    }
    expect(isConfigError(error) && /TESSERA_CPU sse2: not one of auto, avx512, avx2/.test(String(error))).toBe(true);
  });

  it('forces the variant for the whole process and its children', () => {
    const env: NodeJS.ProcessEnv = {};
    for (const variant of nativeVariantsHere()) {
      applyCpuChoice(variant, env);
      expect(nativeVariant()).toBe(variant);
      expect(env['TESSERA_CPU']).toBe(variant);
    }
  });

  it('is bad configuration (exit 2) before any command runs', async () => {
    const run = await runMain(['--cpu', 'neon', 'run', '--model', '/nonexistent.gguf']);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--cpu neon: not one of/);
  });
});
