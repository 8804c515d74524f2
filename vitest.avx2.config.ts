import { defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.js';

// The same suites with the native kernels' AVX2 variant forced in every test process (as
// `tessera --cpu avx2` forces it): `npm run test:avx2 -- <paths>`, e.g. the llama.cpp agreement
// tests (test/llama-cpp/kernel-matrix.test.ts, src/model/load-llama-cpp.test.ts) on a CPU that would
// otherwise pick AVX-512.
export default mergeConfig(base, defineConfig({ test: { setupFiles: ['./test/support/force-avx2.ts'] } }));
