// `node --import ./bench/lib/register-ts.mjs bench/x.ts` runs a TypeScript benchmark directly.
import { register } from 'node:module';

register('./ts-hooks.mjs', import.meta.url);
