// An EBNF expression for a finite set of strings, factored as a trie: at every choice the
// alternatives start with different characters. Why: xgrammar 0.1.27 merges finite-state
// machine states it should not ("MergeEquivalentStates", fixed upstream after this release), so
// a plain list of literals can accept strings outside it: ("6.9" | "7.7" | "7.9" | "8.9")
// accepts "8.7", an enum ["axb", "cxc", "cxb"] accepts "axc". A trie gives it nothing to merge.
// Must never accept a string outside the set.

/** The strings of `values` (at least one), as a trie-shaped EBNF expression. */
export function trieRule(values: readonly string[]): string {
  if (values.length === 0) throw new RangeError('trieRule needs at least one string');
  return node([...new Set(values)].map((v) => [...v]));
}

function node(words: readonly (readonly string[])[]): string {
  const ends = words.some((w) => w.length === 0);
  const byFirst = new Map<string, string[][]>();
  for (const w of words) {
    if (w.length === 0) continue;
    const first = w[0] as string;
    const list = byFirst.get(first) ?? [];
    list.push(w.slice(1));
    byFirst.set(first, list);
  }
  const alts = [...byFirst].map(([first, rests]) => {
    // A chain of single continuations becomes one literal.
    let text = first;
    let next = rests;
    while (next.length === 1 && (next[0] as string[]).length > 0) {
      text += (next[0] as string[])[0];
      next = [(next[0] as string[]).slice(1)];
    }
    const rest = next.length === 1 && (next[0] as string[]).length === 0 ? '' : ` ${node(next)}`;
    return `${literal(text)}${rest}`;
  });
  if (ends) alts.push('""');
  return alts.length === 1 ? `(${alts[0]})` : `(${alts.join(' | ')})`;
}

function literal(text: string): string {
  return `"${[...text]
    .map((c) => {
      const code = c.codePointAt(0) as number;
      if (c === '"' || c === '\\') return `\\${c}`;
      if (code < 0x20) return `\\x${code.toString(16).padStart(2, '0')}`;
      return c;
    })
    .join('')}"`;
}
