// Every `tessera` command registers itself here; one file per command.
import type { Command } from 'commander';

export type RegisterCommand = (program: Command) => void;

export const COMMANDS: readonly RegisterCommand[] = [];
