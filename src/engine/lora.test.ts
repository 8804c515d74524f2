import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, ModelLoadError, type BatchItem, type Tag } from '../core/index.js';
import { createRefDense, createRefOps, type HostTensor } from '../kernels/index.js';
import { PagePool } from '../pages/index.js';
import type { ModelConfig } from '../formats/index.js';
import { tensorToF32, encodeSafetensors, layerName } from '../formats/index.js';
import { LoraBank, type LoraAdapter, type LoraTarget } from './lora.js';
import { genLoraGguf, parseLoraGguf } from './lora-gguf.js';
import { loadPeftLora } from './lora-peft.js';
import { PRESET_CONFIGS, randomModel } from '../gen/index.js';
import { ModelRunner, type ItemResult } from './runner.js';
import { prepareWeights } from './weights-prepared.js';

/** Llama (its Q/K rows permuted in GGUF), GQA 4/2: tiny enough for the reference kernels. */
const CONFIG: ModelConfig = {
  ...PRESET_CONFIGS.tiny,
  arch: 'llama',
  vocabSize: 96,
  hiddenSize: 32,
  intermediateSize: 64,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 8,
};
const PAGE_SIZE = 4;
const HF: Record<LoraTarget, string> = {
  q: 'self_attn.q_proj.weight',
  k: 'self_attn.k_proj.weight',
  v: 'self_attn.v_proj.weight',
  o: 'self_attn.o_proj.weight',
  gate: 'mlp.gate_proj.weight',
  up: 'mlp.up_proj.weight',
  down: 'mlp.down_proj.weight',
};

async function adapterFile(name: string, seed: number): Promise<string> {
  const out = join(tmpdir(), `lora-test-${process.pid}-${name}.gguf`);
  await genLoraGguf(CONFIG, { out, rank: 4, alpha: 8, seed });
  return out;
}

/** W + scale · B A for every adapted projection: the adapter merged into the weights (f32). */
function merged(tensors: ReadonlyMap<string, HostTensor>, adapter: LoraAdapter): Map<string, HostTensor> {
  const out = new Map(tensors);
  for (const [key, p] of adapter.pairs) {
    const [layer, target] = key.split('.') as [string, LoraTarget];
    const name = layerName(Number(layer), HF[target]);
    const w = tensorToF32(tensors.get(name)!);
    for (let i = 0; i < p.outDim; i++)
      for (let k = 0; k < p.inDim; k++) {
        let sum = 0;
        for (let j = 0; j < p.rank; j++) sum += p.b[i * p.rank + j]! * p.a[j * p.inDim + k]!;
        w[i * p.inDim + k] = w[i * p.inDim + k]! + p.scale * sum;
      }
    out.set(name, { name, dtype: 'f32', shape: [p.outDim, p.inDim], data: new Uint8Array(w.buffer) });
  }
  return out;
}

async function runnerFor(tensors: ReadonlyMap<string, HostTensor>, lora?: LoraBank) {
  const dense = createRefDense();
  const ops = createRefOps();
  const weights = await prepareWeights(CONFIG, tensors, dense, ops);
  const pool = PagePool.create({
    numPages: 12,
    pageSize: PAGE_SIZE,
    numLayers: CONFIG.numLayers,
    numKvHeads: CONFIG.numKvHeads,
    headDim: CONFIG.headDim,
    dtype: 'f32',
  });
  const runner = new ModelRunner({
    config: CONFIG,
    weights,
    dense,
    ops,
    pool,
    maxStepTokens: 32,
    maxStepLogits: 4,
    ...(lora === undefined ? {} : { lora }),
  });
  return { runner, pool };
}

function item(pool: PagePool, rid: string, tokens: number[], adapter?: string): BatchItem {
  const owner = { rid: asRequestId(rid), tenant: asTenantId('t') };
  const result = pool.ledger.allocate(Math.ceil(tokens.length / PAGE_SIZE), owner);
  if (result.kind !== 'allocated') throw new Error('test pool too small');
  const tags: readonly Tag[] = result.tags;
  return { ...owner, tags, tokens, startPos: 0, wantLogits: true, ...(adapter === undefined ? {} : { adapter }) };
}

function logitsOf(result: ItemResult | undefined): Float32Array {
  if (result?.kind !== 'logits') throw new Error(`expected logits, got ${result?.kind}`);
  return result.logits.slice();
}

const maxDiff = (x: Float32Array, y: Float32Array) => x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i]!)), 0);
const PROMPT = [5, 17, 29, 41, 53, 65, 77];

describe('LoRA adapters (llama.cpp GGUF layout) in the forward pass', () => {
  it('a GGUF adapter reads back as [rank, in] / [out, rank] pairs with alpha / rank as the scale', async () => {
    const path = await adapterFile('shape', 1);
    const adapter = parseLoraGguf(await readFile(path), path, CONFIG, 'a', 0.5);
    expect(adapter.pairs.size).toBe(CONFIG.numLayers * 7);
    const q = adapter.pairs.get('0.q')!;
    expect([q.rank, q.inDim, q.outDim, q.scale]).toEqual([4, 32, 32, 0.5 * (8 / 4)]);
    expect(adapter.digest).toMatch(/^[0-9a-f]{32}$/);
    expect(parseLoraGguf(await readFile(path), path, CONFIG, 'a', 1).digest).not.toBe(adapter.digest);
  });

  it('a mixed step (base, adapter A, adapter B) gives each row what the weights merged with its adapter give', async () => {
    const { tensors } = randomModel(CONFIG, 5);
    const [pathA, pathB] = [await adapterFile('a', 1), await adapterFile('b', 2)];
    const a = parseLoraGguf(await readFile(pathA), pathA, CONFIG, 'a');
    const b = parseLoraGguf(await readFile(pathB), pathB, CONFIG, 'b');
    const bank = new LoraBank(CONFIG);
    bank.set(a);
    bank.set(b);
    const mixed = await runnerFor(tensors, bank);
    const results = await mixed.runner.step([
      item(mixed.pool, 'base', PROMPT),
      item(mixed.pool, 'a', PROMPT, 'a'),
      item(mixed.pool, 'b', PROMPT, 'b'),
    ]);
    const [base, withA, withB] = results.map(logitsOf);

    const solo = async (t: ReadonlyMap<string, HostTensor>) => {
      const r = await runnerFor(t);
      return logitsOf((await r.runner.step([item(r.pool, 'x', PROMPT)]))[0]);
    };
    expect(maxDiff(base!, await solo(tensors))).toBe(0); // the base rows are untouched
    expect(maxDiff(withA!, await solo(merged(tensors, a)))).toBeLessThan(1e-4);
    expect(maxDiff(withB!, await solo(merged(tensors, b)))).toBeLessThan(1e-4);
    expect(maxDiff(withA!, base!)).toBeGreaterThan(0.05); // a visible effect
    expect(maxDiff(withA!, withB!)).toBeGreaterThan(0.05);
  });

  it('a step naming an adapter the bank does not hold throws; files that are not adapters are refused', async () => {
    const { tensors } = randomModel(CONFIG, 5);
    const r = await runnerFor(tensors, new LoraBank(CONFIG));
    await expect(r.runner.step([item(r.pool, 'x', PROMPT, 'missing')])).rejects.toThrow(/not loaded/);
    const path = await adapterFile('arch', 3);
    const bytes = await readFile(path);
    expect(() => parseLoraGguf(bytes, path, { ...CONFIG, arch: 'qwen2' }, 'x')).toThrow(ModelLoadError);
    expect(() => parseLoraGguf(bytes, path, { ...CONFIG, hiddenSize: 64, headDim: 16 }, 'x')).toThrow(/do not fit/);
  });

  it('a PEFT directory (adapter_config.json + adapter_model.safetensors) reads as the same pairs as its GGUF twin', async () => {
    const path = await adapterFile('peft', 4);
    const gguf = parseLoraGguf(await readFile(path), path, CONFIG, 'g');
    const dir = join(tmpdir(), `lora-test-${process.pid}-peft`);
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, 'adapter_config.json'),
      JSON.stringify({ r: 4, lora_alpha: 8, target_modules: ['q_proj'] }),
    );
    const tensors: HostTensor[] = [];
    for (const [key, p] of gguf.pairs) {
      const [layer, target] = key.split('.') as [string, LoraTarget];
      const base = `base_model.model.${layerName(Number(layer), HF[target]).replace(/\.weight$/, '')}`;
      const f32 = (x: Float32Array) => new Uint8Array(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength));
      tensors.push({ name: `${base}.lora_A.weight`, dtype: 'f32', shape: [p.rank, p.inDim], data: f32(p.a) });
      tensors.push({ name: `${base}.lora_B.weight`, dtype: 'f32', shape: [p.outDim, p.rank], data: f32(p.b) });
    }
    await writeFile(join(dir, 'adapter_model.safetensors'), encodeSafetensors(tensors));
    const peft = await loadPeftLora(dir, CONFIG, 'p');
    expect([...peft.pairs.keys()].sort()).toEqual([...gguf.pairs.keys()].sort());
    for (const [key, p] of gguf.pairs) expect(peft.pairs.get(key)).toEqual(p);
    await expect(loadPeftLora(dir, { ...CONFIG, intermediateSize: 128 }, 'p')).rejects.toThrow(/do not fit/);
  });
});
