// The composition root: argv -> typed Config -> the command that runs it. The only layer that
// reads process.env and turns errors into exit codes (2 for bad configuration, 1 otherwise).
import { Command, CommanderError } from 'commander';
import { isConfigError, isTesseraError } from '../core/index.js';
import { COMMANDS } from './commands/index.js';
import { registerCpuOption } from './config-cpu.js';

export async function main(argv: readonly string[]): Promise<number> {
  const program = new Command('tessera')
    .description('An LLM inference server that never lets a request read KV data it does not own.')
    .version(process.env['npm_package_version'] ?? '0.1.0')
    .exitOverride()
    .showHelpAfterError('(run `tessera --help` for usage)');
  registerCpuOption(program);
  for (const register of COMMANDS) register(program);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    return reportError(error);
  }
}

function reportError(error: unknown): number {
  if (error instanceof CommanderError) {
    // Commander already printed its message (or the help/version text).
    return error.exitCode === 0 ? 0 : 2;
  }
  if (isConfigError(error)) {
    process.stderr.write(`tessera: ${error.message}\n`);
    return 2;
  }
  const listenFailure = listenFailureOf(error);
  if (listenFailure !== null) {
    process.stderr.write(`tessera: ${listenFailure}\n`);
    return 2;
  }
  if (isTesseraError(error)) {
    process.stderr.write(`tessera: ${error.message}\n`);
    if (process.env['TESSERA_DEBUG']) process.stderr.write(`${error.stack ?? ''}\n`);
    return 1;
  }
  process.stderr.write(
    `tessera: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  return 1;
}

/** A listener that could not bind (port taken, address not ours, no permission) is bad configuration: say which. */
function listenFailureOf(error: unknown): string | null {
  if (!(error instanceof Error)) return null;
  const { code, syscall, address, port } = error as NodeJS.ErrnoException & { address?: string; port?: number };
  if (syscall !== 'listen' && syscall !== 'bind') return null;
  const where = `${address ?? '?'}${port === undefined ? '' : `:${port}`}`;
  const why: Record<string, string> = {
    EADDRINUSE: 'the address is already in use (another process listens there; pick another --port)',
    EADDRNOTAVAIL: "the address is not one of this host's (check --host)",
    EACCES: 'permission denied (ports below 1024 need privileges)',
  };
  return `cannot listen on ${where}: ${why[code ?? ''] ?? code ?? error.message}`;
}
