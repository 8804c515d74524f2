import { describe, expect, it } from 'vitest';
import type { ChunkInput, Machine, NetworkInput } from '../machine.js';
import { MachineDriver } from './driver.js';

type Input = NetworkInput | { readonly kind: 'poke'; readonly n: number };
type Effect = { readonly kind: 'echo'; readonly n: number };

/** Records every input; a poke n>0 emits an echo; wakes once at `wakeAt` if set. */
class Recorder implements Machine<Input, Effect> {
  readonly inputs: string[] = [];
  depth = 0;
  maxDepth = 0;
  wakeAt: number | undefined;

  handle(_nowMs: number, input: Input): Effect[] {
    this.depth++;
    this.maxDepth = Math.max(this.maxDepth, this.depth);
    this.inputs.push(input.kind === 'poke' ? `poke ${input.n}` : input.kind);
    if (input.kind === 'tick') this.wakeAt = undefined;
    this.depth--;
    return input.kind === 'poke' && input.n > 0 ? [{ kind: 'echo', n: input.n }] : [];
  }

  wakeAtMs(): number | undefined {
    return this.wakeAt;
  }
}

describe('MachineDriver', () => {
  it('queues an input fed back from a carry-out until the current input is done, never re-entering the machine', () => {
    const machine = new Recorder();
    const driver: MachineDriver<Input, Effect> = new MachineDriver<Input, Effect>(machine, (e) => {
      driver.handle({ kind: 'poke', n: e.n - 1 });
      machine.inputs.push(`carried out echo ${e.n}`);
    });
    driver.handle({ kind: 'poke', n: 2 });
    expect(machine.inputs).toEqual(['poke 2', 'carried out echo 2', 'poke 1', 'carried out echo 1', 'poke 0']);
    expect(machine.maxDepth).toBe(1);
  });

  it('ticks the machine at its wakeAtMs, and not after stop()', async () => {
    const machine = new Recorder();
    const driver = new MachineDriver<Input, Effect>(machine, () => undefined);
    machine.wakeAt = Date.now() + 20;
    driver.handle({ kind: 'connected', peer: 'p' });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(machine.inputs).toEqual(['connected', 'tick']);
    machine.wakeAt = Date.now() + 20;
    driver.handle({ kind: 'poke', n: 0 });
    driver.stop();
    driver.handle({ kind: 'poke', n: 0 });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(machine.inputs).toEqual(['connected', 'tick', 'poke 0']);
  });

  it('copies a KvChunk piece that must wait its turn: the view it was lent is reused once the call returns', () => {
    const seen: number[][] = [];
    const machine: Machine<NetworkInput | ChunkInput | { readonly kind: 'poke' }, 'echo'> = {
      handle: (_nowMs, input) => {
        if (input.kind === 'chunkPiece') seen.push([...input.bytes]);
        return input.kind === 'poke' ? ['echo'] : [];
      },
      wakeAtMs: () => undefined,
    };
    const lent = new Uint8Array([1, 2, 3]);
    const driver = new MachineDriver(machine, () => {
      driver.chunkHandlers().piece('p0', lent); // arrives while the poke is being handled
      lent.fill(9); // the socket reads its next bytes into the same buffer
    });
    driver.handle({ kind: 'poke' });
    expect(seen).toEqual([[1, 2, 3]]);
  });
});
