// A binary min-heap, for picking the least recently used cache leaf in O(log n).
// Owns: ordering only. Must never look inside its items beyond the comparison it is given.

export class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #before: (a: T, b: T) => boolean;

  /** `before(a, b)`: a comes out before b. Must be a strict total order for a deterministic pop order. */
  constructor(before: (a: T, b: T) => boolean) {
    this.#before = before;
  }

  get size(): number {
    return this.#items.length;
  }

  push(item: T): void {
    const items = this.#items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#before(items[i] as T, items[parent] as T)) break;
      [items[i], items[parent]] = [items[parent] as T, items[i] as T];
      i = parent;
    }
  }

  /** Removes and returns the first item, or undefined when empty. */
  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    items[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let first = i;
      if (left < items.length && this.#before(items[left] as T, items[first] as T)) first = left;
      if (right < items.length && this.#before(items[right] as T, items[first] as T)) first = right;
      if (first === i) return top;
      [items[i], items[first]] = [items[first] as T, items[i] as T];
      i = first;
    }
  }
}
