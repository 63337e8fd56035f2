import type { StoredResets } from '../quota/quota-repository.js';
import type { Worker } from 'node:cluster';
import type { MessagePort, Worker as Thread } from 'node:worker_threads';
import type { EncodedLatency } from '../observe/added-latency.js';
import type { ApiUpstream } from '../console/logic/upstreams.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import type { CounterRef, CounterState, CounterUsage } from '../limiter/counter-store.js';
import type { Trip, TripReply } from '../limiter/counter-trips.js';
import type { StoredApplication } from '../applications/application-schema.js';
import type { StoredQuota } from '../quota/model.js';
import type { UsageRow } from '../quota/usage-history.js';
import type { RestrictionRejections } from '../observe/rejection-history.js';
import type { ReloadOutcome } from '../reload/config-reloader.js';
import type { FixedSettings } from '../reload/fixed-settings.js';

/** A worker's metrics as prom-client's `getMetricsAsJSON` gives them, for the primary to aggregate. */
export type MetricsJson = Array<MetricObjectWithValues<MetricValue<string>>>;

/** Why a data plane could not start: a `ConfigError`'s problems, or an error's message. */
export type StartFailure = { problems: string[] } | { message: string };

/** A whole set, numbered: a later set has a higher generation. */
export interface Numbered<T> {
  generation: number;
  records: T[];
}

/** The whole set of quota definitions, numbered, with the reset generations of applications' counters. */
export interface Definitions extends Numbered<StoredQuota> {
  resets: StoredResets;
}

/** What the primary answers a worker that starts: everything it needs before it listens. */
export interface Welcome {
  /**
   * Digest of the config the primary runs (with its fixed settings): a worker that loaded another
   * config refuses to start.
   */
  fingerprint: string;
  /** The settings the running gateway keeps until a restart, put into the config a worker loads. */
  fixed: FixedSettings;
  definitions: Definitions;
  /** The applications made through the portal API. */
  applications: Numbered<StoredApplication>;
  /** The primary's admin listener, which serves this worker's gateway too. */
  adminPort: number;
  /** Worker processes the primary runs. */
  workers: number;
  /**
   * The primary holds the memory store's counters for its workers (`workers: N`); false when the data
   * plane is a thread of the primary's process, which holds its own (`workers: 1`).
   */
  primaryCounters: boolean;
}

/** Requests between the primary and a worker, each `[what is sent, what is answered]`. */
export interface IpcRequests {
  /** Worker → primary, once, before it listens. */
  hello: [null, Welcome];
  /**
   * Data-plane thread → primary: why it could not start (a port in use, a config refused), for the
   * primary to fail its start with, as a gateway in one thread would.
   */
  failed: [StartFailure, null];
  /** Worker → primary: one trip to the counters the primary holds (`store.type: "memory"`). */
  trip: [Trip, TripReply];
  /**
   * Usage of the counters: worker → primary when the primary holds them (`workers: N`, memory store);
   * primary → data-plane thread when the thread does (`workers: 1`, memory store).
   */
  usage: [{ keyPrefix: string; windowMs: number }, CounterUsage[]];
  /** Worker → primary: lines of usage history, for the memory store's file the primary owns. */
  usageHistory: [UsageRow[], null];
  /** Worker → primary: what some counters the primary holds count now (the data plane's usage path). */
  peek: [CounterRef[], CounterState[]];
  /** Primary → worker: its metrics, for the admin listener's `/metrics`. */
  metrics: [null, MetricsJson];
  /** Primary → worker: the time it added to exchanges, for the admin listener's `/latency`. */
  latency: [null, EncodedLatency];
  /** Primary → worker: the targets of the APIs and what it knows of them, for `/upstreams` and `/readyz`. */
  upstreams: [null, ApiUpstream[]];
  /** Primary → worker: the recent rejections of a quota's restrictions, for the console. */
  rejections: [{ quotaId: string }, RestrictionRejections[]];
  /**
   * Primary → worker: read conf/ again and put it in force, if it is the config the primary reloaded
   * (its fingerprint).
   */
  reload: [{ fingerprint: string }, ReloadOutcome];
}

/** One-way messages between the primary and a worker. */
export interface IpcNotices {
  /** Primary → worker: the whole set of quota definitions, after every change. */
  definitions: Definitions;
  /** Primary → worker: the whole set of the API's applications, after every change. */
  applications: Numbered<StoredApplication>;
  /** Worker → primary: it listens (on the shared ports) and serves. */
  listening: DataPlaneAddress;
  /** Primary → worker: finish the requests in flight (its graceful close), then exit. */
  drain: null;
  /** Primary → worker: write the access lines gathered, and open `accessLog.file` again (SIGUSR2). */
  reopenLogs: null;
}

type RequestKind = keyof IpcRequests;
type NoticeKind = keyof IpcNotices;

/** The messages on the wire; `qg` keeps them apart from node:cluster's and prom-client's own. */
type WireMessage =
  | { qg: 'request'; kind: string; id: number; body: unknown }
  | { qg: 'reply'; id: number; body?: unknown; error?: string }
  | { qg: 'notice'; kind: string; body: unknown };

/** One end of the IPC channel between the primary and a worker. */
export interface IpcEndpoint {
  /** Sends one message; `failed` is called (later) when the channel is closed. */
  send(message: WireMessage, failed: (error: Error) => void): void;
  onMessage(listener: (message: unknown) => void): void;
  /** Called once, when the channel closes. */
  onClose(listener: () => void): void;
}

/** The channel of this worker process to the primary. */
export function primaryEndpoint(): IpcEndpoint {
  return {
    send(message, failed) {
      if (!process.send) {
        failed(new Error('this process has no IPC channel to a primary'));
        return;
      }
      process.send(message, undefined, {}, (error) => error && failed(error));
    },
    onMessage: (listener) => process.on('message', listener),
    onClose: (listener) => process.once('disconnect', listener),
  };
}

/** The channel of the primary to one worker. */
export function workerEndpoint(worker: Worker): IpcEndpoint {
  return {
    send(message, failed) {
      worker.send(message, undefined, (error) => error && failed(error));
    },
    onMessage: (listener) => worker.on('message', listener),
    onClose: (listener) => worker.once('disconnect', listener),
  };
}

/** The channel of the data-plane thread to the primary, in the thread (`parentPort`). */
export function parentEndpoint(port: MessagePort): IpcEndpoint {
  return {
    send(message) {
      port.postMessage(message);
    },
    onMessage: (listener) => port.on('message', listener),
    onClose: (listener) => port.once('close', listener),
  };
}

/** The channel of the primary to its data-plane thread. */
export function threadEndpoint(thread: Thread): IpcEndpoint {
  let exited = false;
  thread.once('exit', () => (exited = true));
  return {
    send(message, failed) {
      if (exited) failed(new Error('the data-plane thread has exited'));
      else thread.postMessage(message);
    },
    onMessage: (listener) => thread.on('message', listener),
    onClose: (listener) => thread.once('exit', listener),
  };
}

const isWireMessage = (message: unknown): message is WireMessage =>
  typeof message === 'object' && message !== null && 'qg' in message;

/**
 * Requests answered by id, and notices, over one IPC channel. A request whose channel closes before the
 * answer rejects; so does one sent on a closed channel, at once.
 */
export class IpcPeer {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(body: unknown): void; reject(error: Error): void }>();
  private readonly handlers = new Map<string, (body: unknown) => unknown>();
  private readonly listeners = new Map<string, Array<(body: unknown) => void>>();
  private closed = false;
  private readonly closeListeners: Array<() => void> = [];

  constructor(private readonly endpoint: IpcEndpoint) {
    endpoint.onMessage((message) => {
      if (isWireMessage(message)) this.receive(message);
    });
    endpoint.onClose(() => this.close());
  }

  /** False once the channel has closed. */
  get open(): boolean {
    return !this.closed;
  }

  request<K extends RequestKind>(kind: K, body: IpcRequests[K][0]): Promise<IpcRequests[K][1]> {
    if (this.closed) return Promise.reject(new Error('the IPC channel is closed'));
    const id = this.nextId;
    this.nextId += 1;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (body: unknown) => void, reject });
      this.endpoint.send({ qg: 'request', kind, id, body }, (error) => this.settle(id, undefined, error));
    });
  }

  /** Answers every request of `kind` with what `handler` returns; a throw answers with its message. */
  answer<K extends RequestKind>(
    kind: K,
    handler: (body: IpcRequests[K][0]) => IpcRequests[K][1] | Promise<IpcRequests[K][1]>,
  ): void {
    this.handlers.set(kind, handler as (body: unknown) => unknown);
  }

  notify<K extends NoticeKind>(kind: K, body: IpcNotices[K]): void {
    if (!this.closed) this.endpoint.send({ qg: 'notice', kind, body }, () => undefined);
  }

  on<K extends NoticeKind>(kind: K, listener: (body: IpcNotices[K]) => void): void {
    const listeners = this.listeners.get(kind) ?? [];
    listeners.push(listener as (body: unknown) => void);
    this.listeners.set(kind, listeners);
  }

  /** Calls `listener` once, when the channel closes (its process is gone, or `close` was called). */
  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  /** Rejects every request still waiting for its answer; later ones reject at once. */
  close(): void {
    if (!this.closed) for (const listener of this.closeListeners.splice(0)) listener();
    this.closed = true;
    for (const id of [...this.pending.keys()])
      this.settle(id, undefined, new Error('the IPC channel closed'));
  }

  private receive(message: WireMessage): void {
    switch (message.qg) {
      case 'reply':
        this.settle(
          message.id,
          message.body,
          message.error === undefined ? undefined : new Error(message.error),
        );
        return;
      case 'notice':
        for (const listener of this.listeners.get(message.kind) ?? []) listener(message.body);
        return;
      case 'request':
        this.serve(message.kind, message.id, message.body);
        return;
    }
  }

  private serve(kind: string, id: number, body: unknown): void {
    const reply = (answer: unknown) => this.endpoint.send({ qg: 'reply', id, body: answer }, () => undefined);
    const fail = (error: unknown) =>
      this.endpoint.send(
        { qg: 'reply', id, error: error instanceof Error ? error.message : String(error) },
        () => undefined,
      );
    const handler = this.handlers.get(kind);
    if (!handler) {
      fail(new Error(`no answer to '${kind}' here`));
      return;
    }
    try {
      const answer = handler(body);
      if (answer instanceof Promise) answer.then(reply, fail);
      else reply(answer);
    } catch (error) {
      fail(error);
    }
  }

  private settle(id: number, body: unknown, error: Error | undefined): void {
    const waiting = this.pending.get(id);
    if (!waiting) return;
    this.pending.delete(id);
    if (error) waiting.reject(error);
    else waiting.resolve(body);
  }
}
