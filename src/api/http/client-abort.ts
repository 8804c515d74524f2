// The abort signal of one HTTP request's back-end work: fired when the client leaves before the
// response is finished (also if it already had) or when the server shuts down. Every route that
// calls the back end takes it from here, so a route cannot forget one of the three cases.
// Must never keep a listener past detach().
import type { ServerResponse } from 'node:http';
import { AbortedError } from '../../core/index.js';

export interface ClientAbort {
  readonly signal: AbortSignal;
  /** The client left before the response was finished. */
  readonly gone: () => boolean;
  /** Removes both listeners; call when the request ends. */
  readonly detach: () => void;
}

export function clientAbort(res: ServerResponse, shutdown: AbortSignal): ClientAbort {
  const controller = new AbortController();
  let gone = false;
  const onClose = (): void => {
    if (res.writableFinished) return;
    gone = true;
    controller.abort(new AbortedError('client disconnected'));
  };
  const onShutdown = (): void => controller.abort(new AbortedError('server shutting down'));
  res.on('close', onClose);
  shutdown.addEventListener('abort', onShutdown, { once: true });
  if (shutdown.aborted) onShutdown();
  if (res.destroyed) onClose();
  return {
    signal: controller.signal,
    gone: () => gone,
    detach: () => {
      res.off('close', onClose);
      shutdown.removeEventListener('abort', onShutdown);
    },
  };
}
