// Every `tessera` command registers itself here; one file per command.
import type { Command } from 'commander';
import { registerGenModel } from './gen-model.js';

export type RegisterCommand = (program: Command) => void;

export const COMMANDS: readonly RegisterCommand[] = [registerGenModel];
