// The write-ahead log and the store on it: records survive a reopen; a torn last line (a crash
// mid-append) is dropped and truncated, so the next append starts clean; a bad line in the middle
// is refused; the store replays files, batches and answers, keeps the first answer of a line,
// and hides one tenant's objects from another.
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchStore, type BatchState, type FileMeta } from './store.js';
import { Wal, WalCorruptError } from './wal.js';

const dirs: string[] = [];
const fresh = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'h4-wal-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const LINES = ['a', 'b', 'c']
  .map((id) => JSON.stringify({ custom_id: id, method: 'POST', url: '/v1/completions', body: { prompt: id } }))
  .join('\n');

/** An uploaded LINES file of `tenant`'s and a 24 h batch of /v1/completions made from it, at `now`. */
function fileAndBatch(store: BatchStore, tenant: string, now: number): { file: FileMeta; batch: BatchState } {
  const file = store.putFile(tenant, 'in.jsonl', 'batch', Buffer.from(LINES), now);
  const meta = {
    tenant,
    endpoint: '/v1/completions',
    inputFileId: file.id,
    completionWindow: '24h',
    createdAt: now,
    expiresAt: now + 86400,
    metadata: null,
  } as const;
  return { file, batch: store.createBatch(meta, file, now) };
}

describe('Wal', () => {
  it('replays what was appended, drops a torn last line and appends after it cleanly', () => {
    const path = join(fresh(), 'log');
    const wal = Wal.open<{ n: number }>(path);
    wal.append({ n: 1 });
    wal.append({ n: 2 });
    wal.close();
    appendFileSync(path, '0badc0de {"n": 3'); // a crash mid-append: no newline
    const again = Wal.open<{ n: number }>(path);
    expect(again.replayed).toEqual([{ n: 1 }, { n: 2 }]);
    again.append({ n: 4 });
    again.close();
    expect(Wal.open<{ n: number }>(path).replayed).toEqual([{ n: 1 }, { n: 2 }, { n: 4 }]);
  });

  it('a last line whose checksum does not match is torn too; a bad line before others is corruption', () => {
    const path = join(fresh(), 'log');
    const wal = Wal.open<{ n: number }>(path);
    wal.append({ n: 1 });
    wal.close();
    const good = readFileSync(path, 'utf8');
    writeFileSync(path, `${good}00000000 {"n":2}\n`);
    expect(Wal.open<{ n: number }>(path).replayed).toEqual([{ n: 1 }]);
    writeFileSync(path, `00000000 {"n":2}\n${good}`);
    expect(() => Wal.open(path)).toThrow(WalCorruptError);
  });
});

describe('BatchStore', () => {
  it('replays files, batches and answers; the first answer of a line wins; tenants see only their own', () => {
    const dir = fresh();
    const store = new BatchStore(dir);
    const { file, batch } = fileAndBatch(store, 'alice', 100);
    expect(batch.lines.map((l) => l.customId)).toEqual(['a', 'b', 'c']);
    expect(store.answer(batch, { index: 1, ok: true, record: { first: true } })).toBe(true);
    expect(store.answer(batch, { index: 1, ok: true, record: { first: false } })).toBe(false);
    store.close();

    const again = new BatchStore(dir);
    const replayed = again.batch('alice', batch.id);
    expect(replayed?.status).toBe('in_progress');
    expect(replayed?.results.get(1)?.record).toEqual({ first: true });
    expect(replayed?.lines).toHaveLength(3); // an unfinished batch's lines are back for the runner
    expect(again.batch('bob', batch.id)).toBeUndefined();
    expect(again.file('bob', file.id)).toBeUndefined();
    expect(again.files('bob')).toEqual([]);
    expect(again.deleteFile('bob', file.id)).toBe(false);
    expect(again.file('alice', file.id)?.bytes).toBe(LINES.length);
    again.close();
  });

  it('answersInMemory (the batch-answers-in-memory fault) loses the answers at a reopen', () => {
    const dir = fresh();
    const store = new BatchStore(dir, { answersInMemory: true });
    const { batch } = fileAndBatch(store, 't', 1);
    store.answer(batch, { index: 0, ok: true, record: {} });
    store.close();
    expect(new BatchStore(dir).batch('t', batch.id)?.results.size).toBe(0);
  });

  it('negative control: with ignoreTenant (the batch-ignore-tenant fault) another tenant reads the file and the batch', () => {
    const dir = fresh();
    const store = new BatchStore(dir, { ignoreTenant: true });
    const { file, batch } = fileAndBatch(store, 'alice', 1);
    expect(store.file('bob', file.id)).toBeDefined();
    expect(store.batch('bob', batch.id)).toBeDefined();
    store.close();
  });
});
