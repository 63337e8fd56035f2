import type { IpcEndpoint } from '../../src/workers/ipc-peer.js';

type Listener = (message: unknown) => void;

/**
 * The two ends of an IPC channel inside one process, as node:cluster's would behave: each message is
 * copied through JSON (the channel's serialization) and delivered on a later turn of the event loop, in
 * order; once closed, sending fails and both ends hear of it.
 */
export function ipcPair(): { primary: IpcEndpoint; worker: IpcEndpoint; close(): void } {
  let closed = false;
  const heardBy = { primary: [] as Listener[], worker: [] as Listener[] };
  const closeListeners: Array<() => void> = [];
  const end = (self: 'primary' | 'worker', other: 'primary' | 'worker'): IpcEndpoint => ({
    send(message, failed) {
      if (closed) {
        setImmediate(failed, new Error('channel closed'));
        return;
      }
      const copy = JSON.parse(JSON.stringify(message)) as unknown;
      setImmediate(() => {
        if (!closed) for (const listener of heardBy[other]) listener(copy);
      });
    },
    onMessage: (listener) => heardBy[self].push(listener),
    onClose: (listener) => closeListeners.push(listener),
  });
  return {
    primary: end('primary', 'worker'),
    worker: end('worker', 'primary'),
    close() {
      if (closed) return;
      closed = true;
      for (const listener of closeListeners) listener();
    },
  };
}
