import type { StoredApplication } from './application-schema.js';

/**
 * Where the applications made through the portal API live (the memory store's file, or Redis). Reads
 * come from this process's copy, which follows every change (its own and, with Redis, other gateways');
 * writes are atomic and durable before they resolve.
 */
export interface ApplicationRepository {
  open(): Promise<void>;
  all(): StoredApplication[];
  get(id: string): StoredApplication | undefined;
  /** @throws ApplicationStoreUnavailable, ApplicationWriteFailed */
  create(application: StoredApplication): Promise<StoredApplication>;
  /**
   * Replaces the application with what `change` makes of the current one, atomically (a concurrent
   * change is read again and `change` applied to it).
   * @throws ApplicationNotFound
   */
  update(id: string, change: (current: StoredApplication) => StoredApplication): Promise<StoredApplication>;
  /** @throws ApplicationNotFound */
  remove(id: string): Promise<void>;
  /**
   * Writes every application of `writes`, or none: one atomic, durable write, made only when each is
   * still as `previous` says it was read (undefined: absent).
   * @throws ApplicationChanged, ApplicationStoreUnavailable; nothing is written then
   */
  writeAll(writes: readonly ApplicationWrite[]): Promise<void>;
  /** Called with the whole set after every change this process learns of. */
  onChange(listener: (applications: StoredApplication[]) => void): void;
  close(): Promise<void>;
}

/** One write of a batch: an application as it is to be, and as it was read (undefined: absent). */
export interface ApplicationWrite {
  application: StoredApplication;
  previous: StoredApplication | undefined;
}

/** An application of a batch changed since it was read: nothing was written. */
export class ApplicationChanged extends Error {
  constructor(id: string) {
    super(`application '${id}' changed since it was read`);
  }
}

export class ApplicationNotFound extends Error {
  constructor(id: string) {
    super(`no application with id '${id}'`);
  }
}

/** The store cannot be reached (Redis down); nothing changed. */
export class ApplicationStoreUnavailable extends Error {}
