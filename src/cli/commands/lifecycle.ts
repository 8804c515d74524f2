// How a PD process (worker, router, `up`) learns it should stop: the first SIGINT or SIGTERM
// (a second one exits at once), or, for a child of `tessera up` (TESSERA_SUPERVISED=1), its
// stdin closing: the parent is gone (even after kill -9), and a child must not outlive it.
// Must never: swallow a second signal, or let a supervised child run on with no parent.
export function stopRequested(supervised: boolean, log: (line: string) => void): Promise<number> {
  return new Promise((done) => {
    // Reading stdin keeps the process alive: stop reading once stopping.
    let settled = false;
    const resolve = (code: number): void => {
      if (settled) return;
      settled = true;
      if (supervised) process.stdin.destroy();
      done(code);
    };
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      log(signal);
      process.once('SIGINT', () => process.exit(130));
      process.once('SIGTERM', () => process.exit(143));
      resolve(0);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    if (supervised) {
      const orphaned = (): void => {
        if (settled) return;
        log('the parent (tessera up) is gone: stopping');
        resolve(0);
      };
      process.stdin.once('end', orphaned);
      process.stdin.once('close', orphaned);
      process.stdin.on('error', orphaned);
      process.stdin.resume();
    }
  });
}

/** Resolves after ms. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
