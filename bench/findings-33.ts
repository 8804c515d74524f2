// Issue 33's findings, replayed (`npm run bench:findings`): each attack of the issue, as the issue
// describes it, against a real `tessera serve` on m100 (q4_0 GGUF at /tmp/m100.gguf, 32k vocabulary,
// two API keys) and, where the finding was on a cluster, a real `tessera up` (router, prefill and
// decode as separate processes); special-token text on gen-model's qwen3-tiny (its real Qwen3
// template). Each row prints what the issue measured (before) and what the tree does now (after):
// the status, the time it took, and the longest /health answer while it ran (polled every 25 ms
// from this process: the event loop's stall as a stranger sees it). The table in docs/serving.md
// ("Issue 33, finding by finding") is this script's output. Not a test: it asserts nothing; the
// e2e tests named there are the pass/fail side of each defence. Fairness (finding 5) has its own
// benchmark, bench:fair; finding 8 (npm test on a fresh machine) is not a server attack.
//
//   node --import ./bench/lib/register-ts.mjs bench/findings-33.ts [--only 1,3,7d ...] [--n 8]
import { existsSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { loadavg } from 'node:os';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { genModel } from '../src/gen/index.js';
import { findings7 } from './lib/findings-33-work.js';
import { KEY_A, KEY_B, client, fmt, schemaFormat, start, statusOf, watched, type Proc } from './lib/findings-33-lib.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const ONLY = flag('--only')?.split(',');
/** Samples per output-validity finding (temperature 1, seeds 1..N). */
const N = Number(flag('--n') ?? 8);
const M100 = '/tmp/m100.gguf';
const QWEN = '/tmp/findings33-qwen3-tiny.gguf';

interface Row {
  readonly id: string;
  readonly finding: string;
  readonly before: string;
  after: string;
}
const rows: Row[] = [];
const wanted = (id: string): boolean => ONLY === undefined || ONLY.some((o) => id === o || id.startsWith(o));

/** A socket that connects and sends nothing; resolves once connected. */
function silent(port: number, sockets: Socket[]): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port }, () => {
      s.off('error', reject);
      s.on('error', () => undefined);
      resolve(s);
    });
    s.once('error', reject);
    s.resume();
    sockets.push(s);
  });
}

async function flood(port: number, n: number, sockets: Socket[]): Promise<number> {
  let opened = 0;
  for (let i = 0; i < n; i += 100) {
    const batch = await Promise.allSettled(Array.from({ length: Math.min(100, n - i) }, () => silent(port, sockets)));
    opened += batch.filter((b) => b.status === 'fulfilled').length;
  }
  return opened;
}

/** Seconds until the server closed `s`, or `open after N s`. */
function closedAfter(s: Socket, watchMs: number): Promise<string> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(`open after ${watchMs / 1000} s`), watchMs);
    s.once('close', () => {
      clearTimeout(timer);
      resolve(`closed at ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    });
  });
}

const portOf = (p: Proc): number => Number(new URL(p.url).port);
const chat = (p: Proc, key = KEY_A) =>
  statusOf(
    client(p, key).chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 4,
    }),
  );

function nested(depth: number): Record<string, unknown> {
  let s: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { type: 'object', properties: { a: s }, required: ['a'] };
  return s;
}
const SIMPLE = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };

function add(id: string, finding: string, before: string, after: string): void {
  rows.push({ id, finding, before, after });
  console.log(`${id.padEnd(4)} ${finding}\n     before: ${before}\n     after:  ${after}`);
}

/** Findings 1-2: one schema poisons structured outputs; the first compile on the main thread. */
async function findings12(serve: Proc): Promise<void> {
  if (wanted('1')) {
    const deep = await statusOf(
      client(serve).chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 8,
        response_format: schemaFormat(nested(200)),
      }),
    );
    const b = client(serve, KEY_B);
    const simple = await statusOf(
      b.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'n' }],
        max_tokens: 12,
        response_format: schemaFormat(SIMPLE),
      }),
    );
    const object = await statusOf(
      b.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'o' }],
        max_tokens: 8,
        response_format: { type: 'json_object' },
      }),
    );
    add(
      '1',
      "a json_schema nested 200 objects deep, then another tenant's simple schema and json_object (serve)",
      '400 "memory access out of bounds", then every structured request of every tenant 400 until restart',
      `${deep.status} "${deep.message.slice(0, 80)}"; then tenant B: simple schema ${simple.status}, json_object ${object.status}`,
    );
  }
  if (wanted('2')) {
    const schema = {
      type: 'object',
      properties: { fresh: { type: 'string' }, k: { type: 'integer' } },
      required: ['fresh', 'k'],
    };
    const r = await watched(serve, () =>
      statusOf(
        client(serve).chat.completions.create({
          model: 'm',
          messages: [{ role: 'user', content: 'x' }],
          max_tokens: 12,
          response_format: schemaFormat(schema),
        }),
      ),
    );
    add(
      '2',
      'the first compile of a new schema on m100 (32k vocabulary): the longest /health answer meanwhile (serve)',
      '/health held 153 ms',
      `${r.status} in ${fmt(r.ms)}; /health at most ${fmt(r.healthMaxMs)}`,
    );
  }
}

/** Finding 3a: a silent and a slowloris socket, timed on a serve of their own. */
async function finding3a(serve: Proc): Promise<void> {
  {
    const sockets: Socket[] = [];
    const quiet = await silent(portOf(serve), sockets);
    const loris = await silent(portOf(serve), sockets);
    loris.write('GET /health HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => loris.writable && loris.write(`X-Slow-${Date.now()}: 1\r\n`), 5000);
    const [a, b] = await Promise.all([closedAfter(quiet, 70_000), closedAfter(loris, 70_000)]);
    clearInterval(trickle);
    for (const s of sockets) s.destroy();
    add(
      '3a',
      'a socket that never sends a byte; one that trickles a header line every 5 s (serve)',
      'both still open after 70 s and 120 s',
      `silent: ${a}; slowloris: ${b}`,
    );
  }
}

/** Finding 3b-d: the connection cap full of silent sockets; a 1024-descriptor limit. */
async function finding3caps(serve: Proc, up: Proc | undefined): Promise<void> {
  for (const [id, p] of [
    ['3b', serve],
    ['3c', up],
  ] as const) {
    if (p === undefined || !wanted(id)) continue;
    const sockets: Socket[] = [];
    const opened = await flood(portOf(p), 2000, sockets);
    const r = await chat(p);
    const stillOpen = sockets.filter((s) => !s.destroyed && !s.readableEnded).length;
    for (const s of sockets) s.destroy();
    add(
      id,
      `2000 silent sockets, then a new client's chat request (${id === '3b' ? 'serve' : 'up: the router'})`,
      '503 for every new client',
      `${opened} opened, ${stillOpen} still open after; the client's request ${r.status}`,
    );
  }
  if (wanted('3d')) {
    const limited = await start('serve', M100, [], 'ulimit -n 1024');
    try {
      const sockets: Socket[] = [];
      const opened = await flood(portOf(limited), 1100, sockets);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const r = await chat(limited);
      for (const s of sockets) s.destroy();
      add(
        '3d',
        'serve under `ulimit -n 1024`: 1100 silent sockets, then a new client',
        'everyone locked out while they are held',
        `${opened} opened; the client's request ${r.status}`,
      );
    } finally {
      limited.child.kill('SIGTERM');
    }
  }
}

/** Finding 4: strangers flood the decode worker's cluster port beside the router's link. */
async function finding4(up: Proc): Promise<void> {
  const address = /\[decode-1\] tessera: cluster listener on [\d.]+:(\d+)/.exec(up.out)?.[1];
  if (address === undefined) throw new Error('no decode cluster listener in the output of `up`');
  const sockets: Socket[] = [];
  const opened = await flood(Number(address), 3000, sockets);
  const results = await Promise.all(Array.from({ length: 4 }, () => chat(up)));
  for (const s of sockets) s.destroy();
  const codes = results.map((r) => (r.status === 200 ? '200' : `${r.status} ${r.message.slice(0, 60)}`));
  add(
    '4',
    "3000 unauthenticated connections on the decode worker's cluster port, then requests through the router (up)",
    '502 transfer_failed "the connection to decode ... closed (read ECONNRESET)"',
    `${opened} stranger connections opened; 4 requests: ${codes.join(', ')}`,
  );
}

/** Finding 6: structured outputs that do not validate. */
async function finding6(serve: Proc): Promise<void> {
  const ajv = new Ajv({ strict: true });
  const c = client(serve);
  const validity = async (schema: Record<string, unknown>, via: 'chat' | 'responses' | 'tool'): Promise<string> => {
    const validate = ajv.compile(schema);
    let stopped = 0;
    const bad: string[] = [];
    const errors: string[] = [];
    for (let seed = 1; seed <= N; seed++) {
      let text: string | undefined;
      let complete = false;
      try {
        if (via === 'chat') {
          const r = await c.chat.completions.create({
            model: 'm',
            messages: [{ role: 'user', content: 'A value.' }],
            temperature: 1,
            seed,
            max_tokens: 60,
            response_format: schemaFormat(schema),
          });
          complete = r.choices[0]?.finish_reason === 'stop';
          text = r.choices[0]?.message.content ?? '';
        } else if (via === 'tool') {
          const r = await c.chat.completions.create({
            model: 'm',
            messages: [{ role: 'user', content: 'Call it.' }],
            temperature: 1,
            seed,
            max_tokens: 60,
            tools: [{ type: 'function', function: { name: 'set', parameters: schema, strict: true } }],
            tool_choice: 'required',
          });
          complete = r.choices[0]?.finish_reason === 'tool_calls';
          const call = r.choices[0]?.message.tool_calls?.[0];
          text = call?.type === 'function' ? call.function.arguments : '';
        } else {
          const r = await c.responses.create({
            model: 'm',
            input: 'A value.',
            temperature: 1,
            max_output_tokens: 60,
            text: { format: { type: 'json_schema', name: 'out', schema, strict: true } },
          });
          complete = r.status === 'completed';
          text = r.output_text;
        }
      } catch (error) {
        errors.push(error instanceof OpenAI.APIError ? `${error.status}` : String(error));
        continue;
      }
      if (!complete) continue;
      stopped++;
      let ok = false;
      try {
        ok = validate(JSON.parse(text ?? '')) === true;
      } catch {
        ok = false;
      }
      if (!ok) bad.push(text ?? '');
    }
    return (
      `${stopped} of ${N} complete, ${bad.length} invalid${bad.length > 0 ? ` (${bad.slice(0, 2).join(', ')})` : ''}` +
      (errors.length > 0 ? `; errors ${errors.join(',')}` : '')
    );
  };
  const obj = (props: Record<string, unknown>) => ({
    type: 'object',
    properties: props,
    required: Object.keys(props),
    additionalProperties: false,
  });
  if (wanted('6a')) {
    const schema = obj({
      label: { type: 'string', enum: ['positive', 'negative'] },
      confidence: { type: 'number', minimum: 0, maximum: 1 },
    });
    add(
      '6a',
      '`{"type":"number","minimum":0,"maximum":1}`, temperature 1 (chat; ajv strict on every "stop")',
      '{"label":"negative","confidence":1.291291} with finish_reason "stop"',
      await validity(schema, 'chat'),
    );
    add(
      '6a2',
      'the same bound as a tool argument under tool_choice "required"',
      '{"level":1.291691} with finish_reason "tool_calls"',
      await validity(obj({ level: { type: 'number', minimum: 0, maximum: 1 } }), 'tool'),
    );
  }
  if (wanted('6b')) {
    add(
      '6b',
      'minimum 0.5, maximum 1.5 in the Responses API text.format (ajv on every "completed")',
      '"completed" with {"ratio":1r5}, {"ratio":0 5}, {"ratio":055}',
      await validity(obj({ ratio: { type: 'number', minimum: 0.5, maximum: 1.5 } }), 'responses'),
    );
    add(
      '6b2',
      '`minimum: -1.25`; `exclusiveMinimum: 0` (chat)',
      '{"x":-1r25}; {"x":0}',
      `${await validity(obj({ x: { type: 'number', minimum: -1.25 } }), 'chat')}; ` +
        (await validity(obj({ x: { type: 'number', exclusiveMinimum: 0 } }), 'chat')),
    );
  }
  if (wanted('6c')) {
    const refusals: string[] = [];
    for (const leaf of [
      { type: 'number', multipleOf: 0.5 },
      { type: 'string', format: 'email', maxLength: 30 },
      { type: 'string', format: 'uri', maxLength: 30 },
    ]) {
      const r = await statusOf(
        c.chat.completions.create({
          model: 'm',
          messages: [{ role: 'user', content: 'v' }],
          max_tokens: 40,
          response_format: schemaFormat(obj({ v: leaf })),
        }),
      );
      refusals.push(`${JSON.stringify(leaf)}: ${r.status}${r.status === 400 ? ` "${r.message.slice(0, 70)}"` : ''}`);
    }
    add(
      '6c',
      '`multipleOf: 0.5`; `maxLength: 30` beside `format: "email"` / `"uri"`',
      '1.312912; past 300 characters (silently ignored, no 400)',
      refusals.join('; '),
    );
  }
  if (wanted('6d')) {
    const keys: string[] = [];
    for (let seed = 1; seed <= N; seed++) {
      const r = await c.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'Ping.' }],
        temperature: 1,
        seed,
        max_tokens: 40,
        tools: [{ type: 'function', function: { name: 'ping' } }],
        tool_choice: 'required',
      });
      const call = r.choices[0]?.message.tool_calls?.[0];
      keys.push(call?.type === 'function' ? call.function.arguments : `(${r.choices[0]?.finish_reason})`);
    }
    add(
      '6d',
      'a function without `parameters` under tool_choice "required"',
      'the model writes any keys',
      `arguments: ${[...new Set(keys)].join(' ')}`,
    );
  }
  if (wanted('6e')) {
    const tools = [
      { type: 'function' as const, function: { name: 'lookup', parameters: obj({ query: { type: 'string' } }) } },
    ];
    const r = await c.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'Look up.' }],
      max_tokens: 3,
      tools,
      tool_choice: 'required',
    });
    const ch = r.choices[0];
    const resp = await c.responses.create({
      model: 'm',
      input: 'Look up.',
      max_output_tokens: 3,
      tools: [{ type: 'function', name: 'lookup', parameters: obj({ query: { type: 'string' } }), strict: true }],
      tool_choice: 'required',
    });
    const items = resp.output.map((o) => `${o.type}${'status' in o ? `:${o.status}` : ''}`).join(',') || 'none';
    add(
      '6e',
      'a forced call cut by max_tokens (chat; Responses)',
      'chat: `[{"name":"` as content; Responses: an output_text item "completed" in an "incomplete" response',
      `chat: finish_reason ${ch?.finish_reason}, content ${JSON.stringify(ch?.message.content)}, ` +
        `tool_calls ${ch?.message.tool_calls?.length ?? 0}; Responses: ${resp.status}, items [${items}]`,
    );
  }
}

async function main(): Promise<void> {
  if (!existsSync(M100)) throw new Error(`${M100} is missing: npm run bench:fair generates it`);
  if (!existsSync(QWEN) && wanted('7j')) await genModel({ preset: 'qwen3-tiny', format: 'gguf', out: QWEN, seed: 1 });
  const load = (): string =>
    loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
  console.log(
    `bench:findings  issue 33's findings replayed; m100 q4_0 (serve, up), qwen3-tiny; load average ${load()}`,
  );
  const needUp = ['3c', '4'].some(wanted);
  const [serve, up] = await Promise.all([
    start('serve', M100),
    needUp ? start('up', M100) : Promise.resolve(undefined),
  ]);
  let timed: Proc | undefined;
  try {
    await findings12(serve);
    // Finding 3's timing sockets are watched while the rest runs (70 s), on their own serve so that
    // the floods and the cap cannot close them early.
    timed = wanted('3a') ? await start('serve', M100) : undefined;
    const timing = timed === undefined ? Promise.resolve() : finding3a(timed);
    if (up !== undefined && wanted('4')) await finding4(up);
    await finding6(serve);
    await findings7(serve, wanted, add);
    if (['3b', '3c', '3d'].some(wanted)) await finding3caps(serve, up);
    await timing;
  } catch (error) {
    console.error(error);
    process.exitCode = 1;
  } finally {
    serve.child.kill('SIGTERM');
    up?.child.kill('SIGTERM');
    timed?.child.kill('SIGTERM');
  }
  console.log(`load average at the end: ${load()}`);
  console.log('\n| # | finding | before (issue 33) | after (this run) |\n|---|---|---|---|');
  const cell = (t: string): string => t.replaceAll('|', '\\|');
  for (const r of rows) console.log(`| ${r.id} | ${cell(r.finding)} | ${cell(r.before)} | ${cell(r.after)} |`);
  process.exit(process.exitCode ?? 0);
}

await main();
