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
  /** Called with the whole set after every change this process learns of. */
  onChange(listener: (applications: StoredApplication[]) => void): void;
  close(): Promise<void>;
}

export class ApplicationNotFound extends Error {
  constructor(id: string) {
    super(`no application with id '${id}'`);
  }
}

/** The store cannot be reached (Redis down); nothing changed. */
export class ApplicationStoreUnavailable extends Error {}
