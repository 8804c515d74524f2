// A `$ref` cycle that never reaches a value: definitions that are nothing but a reference, in a
// ring (`{"$defs":{"n":{"$ref":"#/$defs/n"}}}`). xgrammar compiles such a schema, and a request
// then dead-ends wherever the ring is used (its mask allows no token): refused up front instead.
// Linear: each definition has at most one such reference, so the graph is walked once.
// Must never refuse a recursion through a value (`{"type":"object","properties":{"next":{"$ref":...}}}`).

/** Keys that say nothing about a value: a definition with only these and `$ref` is a pure reference. */
const ANNOTATIONS = new Set(['$ref', 'title', 'description', '$comment', 'examples', 'default']);

/** The first cycle of pure references among `root`'s `$defs`/`definitions`, as "a -> b -> a"; else null. */
export function refCycle(root: unknown): string | null {
  if (!isRecord(root)) return null;
  const next = new Map<string, string>(); // pointer of a pure-reference definition -> its target
  for (const section of ['$defs', 'definitions']) {
    const defs = root[section];
    if (!isRecord(defs)) continue;
    for (const [name, def] of Object.entries(defs)) {
      if (!isRecord(def) || typeof def.$ref !== 'string') continue;
      if (Object.keys(def).every((key) => ANNOTATIONS.has(key))) next.set(`#/${section}/${name}`, def.$ref);
    }
  }
  const done = new Set<string>();
  for (const start of next.keys()) {
    const path: string[] = [];
    const onPath = new Set<string>();
    let at: string | undefined = start;
    while (at !== undefined && !done.has(at)) {
      if (onPath.has(at)) return [...path.slice(path.indexOf(at)), at].join(' -> ');
      onPath.add(at);
      path.push(at);
      at = next.get(at);
    }
    for (const p of path) done.add(p);
  }
  return null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
