import type { QuotaRecord, StoredQuota } from './model.js';
import type { ResetGenerations } from './quota-index.js';

/**
 * Where quota definitions live. Reads come from this process's copy, which follows every change (its
 * own and, for a shared store, other processes'); writes are atomic and durable before they resolve.
 */
export interface QuotaRepository {
  /** Loads the definitions, creating the well-known quotas where missing, and starts following changes. */
  open(): Promise<void>;
  all(): StoredQuota[];
  get(id: string): StoredQuota | undefined;
  /** The own quota of an application, if it has one. */
  ofApplication(application: string): StoredQuota | undefined;
  /**
   * Stored definitions that the quota schema refuses (written by another version, or by hand): they are
   * not enforced, and `replace` or `remove` of their id fixes or deletes them. Always empty for the file
   * store, which refuses to open with one.
   */
  refused(): RefusedQuota[];
  /**
   * @throws QuotaConflict when the record's application already has a quota, or when it names a plan
   * that is none (plans.ts).
   */
  create(record: QuotaRecord): Promise<StoredQuota>;
  /**
   * Replaces the quota with the record's id, keeping the application it belongs to; the plan is the
   * record's (none turns a membership into an own quota).
   * @throws QuotaNotFound, QuotaPreconditionFailed when `ifMatch` is given and is not the current ETag,
   * QuotaConflict when the write breaks a rule of plans (a plan in use made into no plan).
   */
  replace(record: QuotaRecord, ifMatch?: string): Promise<StoredQuota>;
  /** @throws QuotaNotFound, QuotaPreconditionFailed, QuotaConflict for a plan applications are on */
  remove(id: string, ifMatch?: string): Promise<void>;
  /**
   * Writes every record of `writes`, or none: one atomic, durable write. A creation needs its id free and
   * its application without a quota; a replacement needs the ETag it names, and keeps the application
   * of the record it replaces. The rules of plans are checked on the set as the whole batch leaves it,
   * so the order of the writes does not matter.
   * @throws QuotaPreconditionFailed (an id taken, changed or gone since it was read), QuotaConflict (an
   * application with a quota already, a rule of plans), or the store's failures; nothing is written then
   */
  writeAll(writes: readonly QuotaWrite[]): Promise<void>;
  /**
   * How many times each counter of an application was reset (see `QuotaIndex`): kept with the
   * definitions, and followed like them, so that every gateway moves to fresh counters as soon as it
   * would learn of a quota change.
   */
  resets(): ResetGenerations;
  /**
   * Raises by one the reset generation of `application`'s counters under each of `keyBases` (restriction
   * counters, `counterBasesOf`): atomic and durable before it resolves, and then this process's.
   * @throws QuotaStoreUnavailable, QuotaWriteFailed; nothing changed then
   */
  reset(application: string, keyBases: readonly string[]): Promise<void>;
  /** Called with the whole set after every change this process learns of (a reset too). */
  onChange(listener: (quotas: StoredQuota[]) => void): void;
  close(): Promise<void>;
}

/** One write of a batch: a record to create (no `etag`), or to replace if it still has `etag`. */
export interface QuotaWrite {
  record: QuotaRecord;
  etag?: string;
}

/** A stored definition that the quota schema refuses, with every problem it has and its text as stored. */
export interface RefusedQuota {
  id: string;
  /** The ETag of the stored text, for `If-Match`. */
  etag: string;
  /** The application it belongs to, when the store can tell. */
  application?: string;
  problems: string[];
  stored: string;
}

export class QuotaNotFound extends Error {
  constructor(id: string) {
    super(`no quota with id '${id}'`);
  }
}

export class QuotaPreconditionFailed extends Error {
  constructor(id: string) {
    super(`quota '${id}' has changed since you read it (If-Match does not match its ETag)`);
  }
}

export class QuotaConflict extends Error {}

/** Reset generations as stored: application → restriction counter (`keyBase`) → generation. */
export type StoredResets = Record<string, Record<string, number>>;

/** `resets` raised by one for `application`'s counters under each of `keyBases`. */
export function raisedResets(
  resets: StoredResets,
  application: string,
  keyBases: readonly string[],
): StoredResets {
  const own = { ...resets[application] };
  for (const keyBase of keyBases) own[keyBase] = (own[keyBase] ?? 0) + 1;
  return { ...resets, [application]: own };
}

/** Stored reset generations as `QuotaIndex` takes them. */
export function resetGenerationsOf(resets: StoredResets): ResetGenerations {
  return new Map(
    Object.entries(resets).map(([application, own]) => [application, new Map(Object.entries(own))]),
  );
}

/** Reset generations as they are stored (and sent to workers). */
export function storedResetsOf(resets: ResetGenerations): StoredResets {
  return Object.fromEntries([...resets].map(([application, own]) => [application, Object.fromEntries(own)]));
}

/** Whether `value` is reset generations as stored: objects of whole numbers of at least 1. */
export function isStoredResets(value: unknown): value is StoredResets {
  const isObject = (candidate: unknown): candidate is Record<string, unknown> =>
    typeof candidate === 'object' && candidate !== null && !Array.isArray(candidate);
  return (
    isObject(value) &&
    Object.values(value).every(
      (own) =>
        isObject(own) &&
        Object.values(own).every(
          (generation) => Number.isSafeInteger(generation) && (generation as number) > 0,
        ),
    )
  );
}

/** The store cannot be reached (Redis down); nothing changed, and trying again later may work. */
export class QuotaStoreUnavailable extends Error {}

/** The store failed to take the write (disk full, permissions); nothing changed. */
export class QuotaWriteFailed extends Error {}

/** The stored definitions cannot be read as quotas; the store is left as it is. */
export class QuotaStoreCorrupt extends Error {}
