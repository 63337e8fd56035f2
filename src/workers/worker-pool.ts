import cluster from 'node:cluster';
import { fileURLToPath } from 'node:url';
import { Worker as Thread } from 'node:worker_threads';
import { systemClock, type Clock } from '../kit/clock.js';
import { ConfigError } from '../kit/config-error.js';
import { beforeDeadline, deadlinePassed } from '../kit/deadline.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import type { Logger } from '../observe/log.js';
import {
  IpcPeer,
  threadEndpoint,
  workerEndpoint,
  type IpcEndpoint,
  type StartFailure,
  type IpcNotices,
  type IpcRequests,
  type Welcome,
} from './ipc-peer.js';

/** The first restart of a worker waits this long; each quick exit in a row doubles it, up to the most. */
const firstRestartDelayMs = 100;
const longestRestartDelayMs = 10_000;
/** A worker that ran this long before it exited starts the backoff again from the first delay. */
const stableAfterMs = 10_000;

/** Milliseconds before a worker that exited is replaced, after `quickExits` exits in a row (at least 1). */
export function restartDelayMs(quickExits: number): number {
  return Math.min(longestRestartDelayMs, firstRestartDelayMs * 2 ** Math.max(0, quickExits - 1));
}

/** One data plane the pool runs: a node:cluster worker process, or a worker thread of this process. */
interface DataPlaneRun {
  /** The cluster worker's id, or the thread's. */
  id: number;
  /** The worker process's pid; a thread runs in this process. */
  pid: number;
  endpoint: IpcEndpoint;
  /** Ends one still starting, before it can be asked to drain (SIGTERM to a process). */
  stop(): void;
  /** Ends it at once (SIGKILL to a process). */
  kill(): void;
  /** Called once it has exited: with its exit code, or the signal that ended it (a thread: as `stop` or `kill` did). */
  onExit(listener: (code: number | null, signal: string | null) => void): void;
}

/** The CLI, which a worker runs with the primary's arguments (`start --config-dir …`). */
const cliPath = fileURLToPath(new URL('../cli.js', import.meta.url));
/** What the data-plane thread runs: it loads the config and the data plane, never the admin listener. */
const threadPath = fileURLToPath(new URL('../runtime/data-plane-thread.js', import.meta.url));

/** What the data-plane thread is started with. */
export interface DataPlaneThreadData {
  /** The config folder the primary loaded. */
  configDir: string;
}

/**
 * Where the pool's data planes run: worker processes behind the shared ports (`workers: N`), or one
 * thread of this process (`workers: 1`), which listens on the ports itself.
 */
export type DataPlaneHome = { kind: 'processes' } | { kind: 'thread'; data: DataPlaneThreadData };

function processRun(): DataPlaneRun {
  const worker = cluster.fork();
  return {
    id: worker.id,
    pid: worker.process.pid ?? 0,
    endpoint: workerEndpoint(worker),
    stop: () => worker.process.kill('SIGTERM'),
    kill: () => worker.process.kill('SIGKILL'),
    onExit: (listener) => worker.once('exit', listener),
  };
}

function threadRun(data: DataPlaneThreadData, logger: Logger): DataPlaneRun {
  const thread = new Thread(threadPath, { workerData: data });
  const endpoint = threadEndpoint(thread);
  // What a worker process would print as it dies (an exception nothing caught): the thread exits with
  // code 1 and is replaced.
  thread.on('error', (error) =>
    logger.error({ err: error, worker: thread.threadId }, 'the data-plane thread failed'),
  );
  // A thread has no signals: the one it is ended with is named, so that a thread ended while it was
  // still starting counts as stopped cleanly, as a worker process ended by SIGTERM does.
  let endedBy: string | null = null;
  const end = (signal: string) => {
    endedBy = signal;
    void thread.terminate();
  };
  return {
    id: thread.threadId,
    pid: process.pid,
    endpoint,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    onExit: (listener) => thread.once('exit', (code) => listener(code, endedBy)),
  };
}

/**
 * The error a data plane that could not start said it met (a worker process writes its own to stderr
 * instead): a config refused stays a `ConfigError`, so that `gateway start` exits 2 as it would in one
 * thread.
 */
function startError(failure: StartFailure | null): Error | null {
  if (!failure) return null;
  return 'problems' in failure ? new ConfigError(failure.problems) : new Error(failure.message);
}

export interface WorkerPoolOptions {
  size: number;
  /** Processes (the default) or one thread. */
  home?: DataPlaneHome;
  logger: Logger;
  clock?: Clock;
  /** What a new worker is answered when it says hello, before it listens. */
  welcome: () => Welcome;
  /** Sets up what else a new worker may ask of the primary (its counter trips). */
  serve?: (worker: IpcPeer, id: number) => void;
  /** Called each time a worker that exited is replaced. */
  onRestart?: () => void;
}

/** One place of the pool: the worker running in it now, and how its predecessors ended. */
interface Slot {
  worker: DataPlaneRun | null;
  peer: IpcPeer | null;
  /** The worker has said hello: its stop listener is set, so it can be asked to drain. */
  greeted: boolean;
  listening: boolean;
  startedAt: number;
  /** Resolves when the worker has exited: whether it stopped cleanly. */
  exited: Promise<boolean> | null;
  /** The worker was still starting when the pool drained, so it was sent SIGTERM. */
  signalled: boolean;
  /** Exits in a row of workers that ran less than `stableAfterMs`. */
  quickExits: number;
  /** Why the data-plane thread running now could not start, as it said before it exited. */
  failure: StartFailure | null;
  restartTimer: unknown;
}

/**
 * The worker processes of the primary (node:cluster), each behind the same data-plane ports. A worker
 * that exits is replaced after a backoff (100 ms, doubling with each quick exit in a row, at most 10 s),
 * never in a tight loop; `drain` asks every worker to close gracefully and waits for them.
 */
export class WorkerPool {
  private readonly slots: Slot[];
  private readonly clock: Clock;
  private readonly home: DataPlaneHome;
  private stopping = false;
  private starting: { resolve(ports: DataPlaneAddress): void; reject(error: Error): void } | null = null;
  private ports: DataPlaneAddress | null = null;

  constructor(private readonly options: WorkerPoolOptions) {
    this.clock = options.clock ?? systemClock;
    this.home = options.home ?? { kind: 'processes' };
    this.slots = Array.from({ length: options.size }, () => ({
      worker: null,
      peer: null,
      greeted: false,
      listening: false,
      startedAt: 0,
      exited: null,
      signalled: false,
      quickExits: 0,
      failure: null,
      restartTimer: null,
    }));
  }

  /** Workers listening now. */
  get listening(): number {
    return this.slots.filter((slot) => slot.listening).length;
  }

  /** The channels of the workers listening now. */
  listeningPeers(): IpcPeer[] {
    return this.slots.flatMap((slot) => (slot.listening && slot.peer ? [slot.peer] : []));
  }

  /**
   * Forks every worker.
   * @returns the shared data-plane ports, once every worker listens
   * @throws when a worker exits before it listens (a port in use, say); the others are left running
   * for `drain`
   */
  start(): Promise<DataPlaneAddress> {
    if (this.home.kind === 'processes') cluster.setupPrimary({ exec: cliPath, args: process.argv.slice(2) });
    return new Promise((resolve, reject) => {
      this.starting = { resolve, reject };
      for (const slot of this.slots) this.fork(slot);
    });
  }

  /**
   * Sends a request to every worker that has said hello.
   * @returns each worker's id and answer, or the error of the request (a worker that exited meanwhile)
   */
  requestAll<K extends keyof IpcRequests>(
    kind: K,
    body: IpcRequests[K][0],
  ): Promise<Array<{ worker: number; answer: IpcRequests[K][1] } | { worker: number; error: Error }>> {
    const greeted = this.slots.filter((slot) => slot.greeted && slot.peer && slot.worker);
    return Promise.all(
      greeted.map(({ peer, worker }) =>
        peer!.request(kind, body).then(
          (answer) => ({ worker: worker!.id, answer }),
          (error: Error) => ({ worker: worker!.id, error }),
        ),
      ),
    );
  }

  /** Sends a notice to every worker that has said hello. */
  broadcast<K extends keyof IpcNotices>(kind: K, body: IpcNotices[K]): void {
    for (const slot of this.slots) if (slot.greeted) slot.peer?.notify(kind, body);
  }

  /**
   * Asks every worker to close gracefully (a worker still starting gets SIGTERM), and replaces none.
   * Workers still running after `timeoutMs` are killed.
   * @returns true when every worker exited with code 0 in time
   */
  async drain(timeoutMs: number): Promise<boolean> {
    this.stopping = true;
    for (const slot of this.slots) {
      if (slot.restartTimer !== null) this.clock.clearTimeout(slot.restartTimer);
      slot.restartTimer = null;
      if (!slot.worker) continue;
      if (slot.greeted) slot.peer?.notify('drain', null);
      else {
        slot.signalled = true;
        slot.worker.stop();
      }
    }
    const running = this.slots.flatMap((slot) => (slot.worker && slot.exited ? [slot] : []));
    const exits = Promise.all(running.map((slot) => slot.exited));
    const clean = await beforeDeadline(exits, timeoutMs, this.clock);
    if (clean !== deadlinePassed) return clean.every(Boolean);
    for (const slot of running) {
      if (!slot.worker) continue;
      this.options.logger.error(
        { worker: slot.worker.id, pid: slot.worker.pid, timeoutMs },
        'worker did not stop in time; killing it',
      );
      slot.worker.kill();
    }
    await exits;
    return false;
  }

  private fork(slot: Slot): void {
    const worker =
      this.home.kind === 'processes' ? processRun() : threadRun(this.home.data, this.options.logger);
    const peer = new IpcPeer(worker.endpoint);
    Object.assign(slot, {
      worker,
      peer,
      greeted: false,
      listening: false,
      signalled: false,
      failure: null,
      startedAt: this.clock.now(),
    });
    peer.answer('failed', (failure) => {
      slot.failure = failure;
      return null;
    });
    peer.answer('hello', () => {
      slot.greeted = true;
      return this.options.welcome();
    });
    this.options.serve?.(peer, worker.id);
    peer.on('listening', (ports) => this.listened(slot, worker, ports));
    slot.exited = new Promise((resolve) =>
      worker.onExit((code, signal) => {
        // A worker still loading its config when SIGTERM came may die of it: it served nothing.
        const clean = code === 0 || (slot.signalled && signal === 'SIGTERM');
        this.exited(slot, worker, code, signal);
        resolve(clean);
      }),
    );
  }

  private listened(slot: Slot, worker: DataPlaneRun, ports: DataPlaneAddress): void {
    if (slot.worker !== worker) return;
    slot.listening = true;
    this.ports ??= ports;
    if (this.starting && this.slots.every((each) => each.listening)) {
      this.starting.resolve(this.ports);
      this.starting = null;
    }
  }

  private exited(slot: Slot, worker: DataPlaneRun, code: number | null, signal: string | null): void {
    if (slot.worker !== worker) return;
    slot.peer?.close();
    Object.assign(slot, { worker: null, peer: null, greeted: false, listening: false });
    if (this.stopping) return;
    if (this.starting) {
      this.starting.reject(
        startError(slot.failure) ??
          new Error(
            `worker ${worker.id} exited (${signal ?? `code ${code}`}) before it listened; see its message above`,
          ),
      );
      this.starting = null;
      this.stopping = true;
      return;
    }
    if (slot.failure)
      this.options.logger.error({ worker: worker.id, failure: slot.failure }, 'worker could not start');
    const ranMs = this.clock.now() - slot.startedAt;
    slot.quickExits = ranMs < stableAfterMs ? slot.quickExits + 1 : 1;
    const delayMs = restartDelayMs(slot.quickExits);
    this.options.logger.error(
      { worker: worker.id, pid: worker.pid, code, signal, ranMs, restartInMs: delayMs },
      'worker exited; starting another',
    );
    this.options.onRestart?.();
    slot.restartTimer = this.clock.setTimeout(() => {
      slot.restartTimer = null;
      if (!this.stopping) this.fork(slot);
    }, delayMs);
  }
}
