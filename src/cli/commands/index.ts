// Every `tessera` command registers itself here; one file per command.
import type { Command } from 'commander';
import { registerGenModel } from './gen-model.js';
import { registerGenLora } from './gen-lora.js';
import { registerPlan } from './plan.js';
import { registerProbe } from './probe.js';
import { registerRouter } from './router.js';
import { registerRun } from './run.js';
import { registerServe } from './serve.js';
import { registerUp } from './up.js';

export type RegisterCommand = (program: Command) => void;

export const COMMANDS: readonly RegisterCommand[] = [
  registerGenModel,
  registerGenLora,
  registerRun,
  registerServe,
  registerPlan,
  registerRouter,
  registerUp,
  registerProbe,
];
