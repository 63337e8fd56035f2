import type { Clock } from '../../kit/clock.js';
import type { Limiter } from '../../limiter/limiter.js';
import type { AccessLog } from '../../observe/access-log.js';
import type { Logger } from '../../observe/log.js';
import type { Metrics } from '../../observe/metrics.js';
import type { Tracing } from '../../observe/tracing.js';
import type { ThresholdAlerts } from '../../notifications/threshold-alerts.js';
import type { CallerBook } from '../../quota/caller-book.js';
import type { QuotaIndex } from '../../quota/quota-index.js';
import type { UsageBook } from '../../quota/usage-history.js';
import type { Exchange, UpstreamProxy } from '../../upstream/upstream-proxy.js';
import type { OpenExchanges } from '../open-exchanges.js';
import type { UsageBudget } from '../usage-endpoint.js';

/**
 * What the steps share across requests (the pipeline holds it, one per gateway): the parts they call,
 * and the pipeline's own bookkeeping. A step is a module function of this and the record.
 */
export interface StepContext {
  readonly proxy: UpstreamProxy;
  /** The quota definitions as compiled now; they change while the gateway runs. */
  readonly quotas: () => QuotaIndex;
  readonly limiter: Limiter;
  readonly logger: Logger;
  /** Where the access lines go; null when the log level leaves them out. */
  readonly accessLog: AccessLog | null;
  readonly metrics: Metrics;
  /** Where each exchange's trace starts; null when tracing is off. */
  readonly tracing: Tracing | null;
  readonly clock: Clock;
  /** The callers each restriction counted by caller counts apart, per application. */
  readonly callers: CallerBook;
  /** The usage path's read budget of each caller (kept across reloads). */
  readonly usageBudget: UsageBudget;
  /** The exchanges forwarded and not yet ended, charged and checked once a second. */
  readonly openExchanges: OpenExchanges;
  /** Where each admitted and refused request is counted for the usage history; null when it is off. */
  readonly usageBook: UsageBook | null;
  /** Watches admitted requests' counts for alert thresholds; null without webhooks. */
  readonly alerts: ThresholdAlerts | null;
  /** Access lines of 429 answers so far, for `accessLog.sample429`. */
  rejectedLines: number;
  /** Told once when the rest of an answer read after its client left is over (`account`). */
  readonly restOfAnswerRead: (exchange: Exchange) => void;
  /** One request less in flight. */
  done(): void;
}

/**
 * What a step answers: true to go on to the next step, false when the request has its answer (or has
 * gone upstream, or its client has left), or a promise of either while it waits.
 */
export type Next = boolean | Promise<boolean>;

export const isPromise = <T>(value: T | Promise<T>): value is Promise<T> => value instanceof Promise;
