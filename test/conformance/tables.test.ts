// The conformance checker's tables equal the model's: every state, message, page action and
// edge in spec/conformance/tables.ts is read here out of spec/tessera.pml (and model/*.pml)
// and compared.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DROP_REASONS,
  EDGES,
  MESSAGES,
  OUTCOMES,
  PAGE_ACTIONS,
  PAGE_STATES,
  ROLES,
  STATES,
} from '../../spec/conformance/tables.js';
import { MODEL, MODEL_PARTS } from '../../spec/scripts/pan.mjs';

/** The whole model: tessera.pml and the files it includes. */
const pml = [MODEL, ...readdirSync(MODEL_PARTS).map((f) => join(MODEL_PARTS, f))]
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n');

/** `#define <prefix><Name> <n>` lines, as names indexed by n. */
function defines(prefix: string): string[] {
  const names: string[] = [];
  for (const m of pml.matchAll(new RegExp(`^#define ${prefix}(\\w+) (\\d+)\\b`, 'gm'))) {
    const [, name, n] = m as unknown as [string, string, string];
    expect(names[Number(n)], `${prefix}${name} reuses number ${n}`).toBeUndefined();
    names[Number(n)] = name;
  }
  return names;
}

/** The EDGE(a, b, X_from, X_to) lines of one X_EDGE macro. */
function edges(macro: string, prefix: string): [string, string][] {
  const start = pml.indexOf(`#define ${macro}(a, b)`);
  expect(start, `${macro} in tessera.pml`).toBeGreaterThanOrEqual(0);
  const body = pml.slice(start, pml.indexOf('\n#define', start + 1));
  return [...body.matchAll(new RegExp(`EDGE\\(a, b, ${prefix}(\\w+), ${prefix}(\\w+)\\)`, 'g'))].map((m) => [
    m[1] as string,
    m[2] as string,
  ]);
}

describe('the conformance tables and the Promela model', () => {
  it('number the roles, states, messages, page actions and outcomes alike', () => {
    expect(defines('ROLE_')).toEqual([...ROLES]);
    expect(defines('R_')).toEqual([...STATES.router]);
    expect(defines('P_')).toEqual([...STATES.prefill]);
    expect(defines('D_')).toEqual([...STATES.decode]);
    expect(defines('M_')).toEqual([...MESSAGES]);
    expect(defines('A_')).toEqual([...PAGE_ACTIONS]);
    expect(defines('PG_')).toEqual([...PAGE_STATES]);
    expect(defines('OUT_')).toEqual([...OUTCOMES]);
    expect(defines('WHY_')).toEqual([...DROP_REASONS]);
  });

  it('list the same edges for every role', () => {
    expect(edges('R_EDGE', 'R_')).toEqual(EDGES.router.map((e) => [...e]));
    expect(edges('P_EDGE', 'P_')).toEqual(EDGES.prefill.map((e) => [...e]));
    expect(edges('D_EDGE', 'D_')).toEqual(EDGES.decode.map((e) => [...e]));
  });

  it('would notice a drifted edge (the parser reads what it claims to)', () => {
    expect(edges('D_EDGE', 'D_')).toContainEqual(['Receiving', 'Decoding']);
    expect(edges('D_EDGE', 'D_')).not.toContainEqual(['AwaitingKv', 'Decoding']);
    expect(edges('R_EDGE', 'R_')).toHaveLength(12);
  });
});
