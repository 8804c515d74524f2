// Turns the model's trace lines (`EV ...`, printed by `spin -T` for a simulation or a replayed
// counterexample of spec/tessera.pml) into TraceEvents, so the model's runs can be fed to the
// same checker as the code's. Owns the numbering <-> name mapping of those lines only.
// Must never: guess. An unknown code or a malformed line throws.
import type { TraceEvent } from '../../src/transfer/index.js';
import { DROP_REASONS, MESSAGES, OUTCOMES, PAGE_ACTIONS, ROLES, STATES } from './tables.js';

/** The model's node names: the router, prefill nodes p0, p1, ..., decode nodes d0, d1, .... */
export function nodeName(role: number, index: number): string {
  const r = pick(ROLES, role, 'role');
  return r === 'router' ? 'router' : `${r === 'prefill' ? 'p' : 'd'}${index}`;
}

export const ridName = (r: number): string => `r${r}`;

/** The model's pairing PN(r) = r % NP: the prefill node that writes request r's pages. */
export function modelWriterOf(numPrefill = 2): (rid: string) => string | undefined {
  return (rid) => {
    const m = /^r(\d+)$/.exec(rid);
    return m === null ? undefined : `p${Number(m[1]) % numPrefill}`;
  };
}

/** One `EV ...` line -> one TraceEvent. */
export function parseModelLine(line: string): TraceEvent {
  const [tag, kind, ...rest] = line.trim().split(/\s+/);
  const n = rest.map((x) => {
    const v = Number(x);
    if (!Number.isInteger(v)) throw new Error(`model trace: not a number in "${line}"`);
    return v;
  });
  if (tag !== 'EV') throw new Error(`model trace: not an EV line: "${line}"`);
  const at = (i: number): number => {
    const v = n[i];
    if (v === undefined) throw new Error(`model trace: too few fields in "${line}"`);
    return v;
  };
  const role = (i: number) => pick(ROLES, at(i), 'role');
  switch (kind) {
    case 'send':
    case 'recv':
      return { kind, node: nodeName(at(0), at(1)), role: role(0), rid: ridName(at(2)), message: pick(MESSAGES, at(3), 'message'), peer: nodeName(at(4), at(5)) };
    case 'drop':
      return { kind, node: nodeName(at(0), at(1)), role: role(0), rid: ridName(at(2)), message: pick(MESSAGES, at(3), 'message'), why: pick(DROP_REASONS, at(4), 'drop reason') };
    case 'state': {
      const states: readonly string[] = STATES[role(0)];
      return { kind, node: nodeName(at(0), at(1)), role: role(0), rid: ridName(at(2)), from: pick(states, at(3), 'state'), to: pick(states, at(4), 'state') };
    }
    case 'page':
      return { kind, node: nodeName(at(0), at(1)), role: role(0), rid: ridName(at(2)), action: pick(PAGE_ACTIONS, at(3), 'page action'), pages: [{ page: at(4), epoch: at(5) }] };
    case 'close':
      return { kind, node: nodeName(at(0), at(1)), role: role(0), peer: nodeName(at(2), at(3)) };
    case 'outcome': {
      const o = pick(OUTCOMES, at(1), 'outcome');
      if (o === 'none') throw new Error(`model trace: outcome 'none' in "${line}"`);
      return o === 'success'
        ? { kind, node: 'router', role: 'router', rid: ridName(at(0)), outcome: 'success' }
        : { kind, node: 'router', role: 'router', rid: ridName(at(0)), outcome: 'error', code: o === 'rejected' ? 'rejected' : 'failed' };
    }
    default:
      throw new Error(`model trace: unknown event kind in "${line}"`);
  }
}

/** The EV lines of spin's output, up to (not past) a reported assertion violation. */
export function modelTrace(spinOutput: string): TraceEvent[] {
  const events: TraceEvent[] = [];
  for (const line of spinOutput.split('\n')) {
    if (/assertion violated/.test(line)) break;
    if (line.startsWith('EV ')) events.push(parseModelLine(line));
  }
  return events;
}

function pick<T>(names: readonly T[], i: number, what: string): T {
  const v = names[i];
  if (v === undefined) throw new Error(`model trace: no ${what} numbered ${i}`);
  return v;
}
