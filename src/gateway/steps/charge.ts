import type { CounterAddition } from '../../limiter/counter-store.js';
import { additionTo, type ApplicableRestriction } from '../../quota/quota-index.js';
import { additionsOf } from '../open-exchanges.js';
import type { ExchangeRecord } from '../record.js';
import type { StepContext } from './context.js';

/**
 * The charges that follow an admission (`admit`) once the exchange's end says what it cost: the bytes
 * its byte restrictions were not charged while it ran (the tick charges the rest, open-exchanges.ts),
 * and the units its answer says. Called by `account`, once each.
 */

/** What the exchange moved that its byte restrictions were not charged while it ran. */
export function chargeBytes(context: StepContext, record: ExchangeRecord): void {
  const amount = record.unchargedBytes();
  if (amount <= 0) return;
  charge(context, record, additionsOf(record.byteCounters, amount), 'bytes');
}

/**
 * What the upstream's answer says the exchange cost, charged to each throttleunits restriction that
 * admitted it (`unitsSaid`); else its default, counted. Answers the most charged to one of them: the
 * units of the usage history.
 */
export function chargeUnits(context: StepContext, record: ExchangeRecord): number {
  const additions: CounterAddition[] = [];
  let most = 0;
  for (const restriction of record.unitCounters) {
    const said = unitsSaid(record, restriction);
    if (said === null) context.metrics.unitsUnreadable(restriction);
    const amount = said ?? restriction.unitDefault;
    if (amount > most) most = amount;
    if (amount > 0) additions.push(additionTo(restriction, amount));
  }
  charge(context, record, additions, 'units');
  return most;
}

/** Adds measured amounts to counters, after the answer: a failure is logged, never answered. */
function charge(
  context: StepContext,
  record: ExchangeRecord,
  additions: CounterAddition[],
  what: string,
): void {
  const charged = context.limiter.add(additions);
  if (charged) {
    charged.catch((error: unknown) => {
      context.logger.error({ err: error, requestId: record.id }, `charging measured ${what} failed`);
    });
  }
}

/**
 * What the answer says an exchange cost for `restriction`: the whole number in its trailer, else in its
 * header (the field wins when it holds one); else what its body paths say, when the answer was read to
 * its end, or what they said before the gateway cut its reading to make room for newer ones
 * (`drainCut`: the cut is the gateway's, and a client must not trade what its answers said for
 * `default` by leaving many calls at once); else null.
 */
export function unitsSaid(record: ExchangeRecord, restriction: ApplicableRestriction): number | null {
  const field = restriction.unitHeader;
  const inField =
    field === null ? null : wholeUnits(record.responseTrailers?.[field] ?? record.responseHeaders?.[field]);
  if (inField !== null || restriction.unitBody === null) return inField;
  if (record.responseTrailers !== null) return record.bodyWatch!.unitsAt(restriction.unitBody);
  return record.drainCut ? record.bodyWatch!.unitsAt(restriction.unitBody, false) : null;
}

/** A field's value as whole units: digits alone (at most 15, RFC 8941's integers), once; else null. */
function wholeUnits(value: string | string[] | undefined): number | null {
  if (typeof value !== 'string') return null;
  const text = value.trim();
  return /^\d{1,15}$/.test(text) ? Number(text) : null;
}
