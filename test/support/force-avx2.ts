// vitest.avx2.config.ts's setup file: forces the native kernels' AVX2 variant in the test process
// before any test runs, and fails the run when this CPU (or build) cannot run it, rather than
// testing AVX-512 under the AVX2 name.
import { nativeVariant, selectNativeVariant } from '../../src/kernels/index.js';

selectNativeVariant('avx2');
if (nativeVariant() !== 'avx2') throw new Error('force-avx2: the AVX2 variant did not take');
