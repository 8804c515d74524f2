#!/usr/bin/env node
// The `tessera` command: a thin launcher for the compiled CLI in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('tessera: dist/ is missing; run `npm install` (or `npm run build`) in the project first.\n');
  process.exit(1);
}
const { main } = await import(entry.href);
// Exit with the command's code once it returns: a thread or socket a failed start-up left
// behind (the engine thread, tokenizer threads) must not keep the process alive. Writes to
// pipes and files are synchronous on Linux, so nothing printed is lost.
process.exit(await main(process.argv.slice(2)));
