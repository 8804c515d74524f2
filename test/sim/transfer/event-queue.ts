// A min-heap of timed events; ties are broken by insertion order, so a seed replays exactly.

interface Entry<T> {
  readonly at: number;
  readonly seq: number;
  readonly event: T;
}

export class EventQueue<T> {
  readonly #heap: Entry<T>[] = [];
  #seq = 0;

  get size(): number {
    return this.#heap.length;
  }

  push(at: number, event: T): void {
    const heap = this.#heap;
    heap.push({ at, seq: this.#seq++, event });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i] as Entry<T>, heap[parent] as Entry<T>)) break;
      [heap[i], heap[parent]] = [heap[parent] as Entry<T>, heap[i] as Entry<T>];
      i = parent;
    }
  }

  pop(): { readonly at: number; readonly event: T } | undefined {
    const heap = this.#heap;
    const top = heap[0];
    if (top === undefined) return undefined;
    const last = heap.pop() as Entry<T>;
    if (heap.length > 0) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < heap.length && before(heap[l] as Entry<T>, heap[m] as Entry<T>)) m = l;
        if (r < heap.length && before(heap[r] as Entry<T>, heap[m] as Entry<T>)) m = r;
        if (m === i) break;
        [heap[i], heap[m]] = [heap[m] as Entry<T>, heap[i] as Entry<T>];
        i = m;
      }
    }
    return { at: top.at, event: top.event };
  }
}

function before<T>(a: Entry<T>, b: Entry<T>): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
