import { createHash } from 'node:crypto';
import { calendarOf, windowMs, type Quota, type Restriction } from './model.js';
import { unitsOf } from './quota-schema.js';

/**
 * Which counter each restriction of a quota counts on: the counter belongs to what the restriction
 * counts, never to its place in the quota, so that inserting, removing or reordering restrictions keeps
 * every other count.
 *
 * - What a restriction counts is its quota, `api`, `method`, `verb`, `type` and window length (and for
 *   `throttleunits` the field and the body paths it reads and its default). Its limit and its mode are not part of it: a
 *   change of limit or mode keeps the count; a change of any of the others starts a new counter.
 * - Enforced twins (restrictions of one quota that count the same thing) share one counter, checked
 *   against each limit and charged once (see `QuotaChecks`): they are charged together or not at all, so
 *   counters of their own would hold the same.
 * - A shadow restriction with a twin counts on a counter of its own, named by its limit too (and its
 *   occurrence among identical shadow twins), so that it holds only what that limit would have admitted.
 *   A restriction without a twin takes the shared counter whatever its mode, so switching the mode keeps
 *   the count.
 *
 * A key is `<quota id>:0:<hash of what it counts>` for a shared counter (the shape in which a quota's
 * first restriction was keyed by its position before, so its count survived the change of scheme) and
 * `<quota id>:s:<hash>` for a shadow twin's own, then its scope's Redis Cluster hash tag.
 */
export function counterBasesOf(quota: Quota, perApplication: boolean): string[] {
  const counted = quota.restrictions.map(countedBy);
  const twins = new Map<string, number>();
  for (const what of counted) twins.set(what, (twins.get(what) ?? 0) + 1);
  const shadowTwinsSeen = new Map<string, number>();
  return quota.restrictions.map((restriction, index) => {
    const what = counted[index]!;
    let counter = `0:${shortHash(what, 12)}`;
    if (restriction.mode === 'shadow' && twins.get(what)! > 1) {
      const own = `${what}|shadow|${unitsOf(restriction.config)}`;
      const occurrence = shadowTwinsSeen.get(own) ?? 0;
      shadowTwinsSeen.set(own, occurrence + 1);
      counter = `s:${shortHash(`${own}|${occurrence}`, 12)}`;
    }
    const base = `${quota.id}:${counter}`;
    // A restriction counted by caller is tagged per caller (`callerCounterKey`), not per scope.
    if (restriction.by !== undefined) return `${base}:by:`;
    return perApplication ? `${base}:app:` : `${base}:${apiScopeTag(restriction.api)}`;
  });
}

/** What a restriction counts, spelt once: two restrictions count the same thing when these are equal. */
function countedBy(restriction: Restriction): string {
  const counted = [
    restriction.api,
    restriction.method,
    restriction.verb ?? '',
    restriction.type,
    windowMs(restriction.config),
  ];
  // Units read from another field, or another charge for an answer that says none, are other counts.
  if (restriction.type === 'throttleunits') {
    counted.push(restriction.config.header ?? '', Number(restriction.config.default ?? 0));
    // Named only when there are some, so that the counters of restrictions without body paths stay.
    if (restriction.config.body !== undefined) counted.push(`body ${String(restriction.config.body)}`);
  }
  // A calendar window counts from other instants: changing to or from one, or its zone or billing day,
  // starts new counters. Named only then, so that sliding counters stay.
  const calendar = calendarOf(restriction.config);
  if (calendar) counted.push(`calendar ${calendar.period} ${calendar.timeZone} ${calendar.startDay}`);
  // Counted by caller, each count means another thing: changing `by` starts new counters.
  if (restriction.by !== undefined) counted.push(`by ${restriction.by}`);
  return counted.join('|');
}

/**
 * The Redis Cluster hash tag of an API-wide counter: one slot per API, so a cluster spreads the APIs
 * over its masters; restrictions on every API (`*`) share one slot, which nothing can spread.
 */
function apiScopeTag(api: string): string {
  return api === '*' ? '{all}' : `{api:${shortHash(api, 16)}}`;
}

/**
 * The counter of one application under an application quota's restriction: its hash tag is the
 * application's, so a cluster spreads applications over its masters. The tag comes before the
 * application id, which may hold braces of its own (the first `{…}` is the tag).
 *
 * `generation` is how many times the counter was reset (`POST …/quota/reset`): each reset moves every
 * gateway to a fresh key as soon as it knows the new generation, so that leases taken on the old key
 * count on a key nobody checks any more (deleting the key alone would leave them to be spent). The
 * generation 0 has no mark, so that the counts kept before resets existed stay.
 */
export function applicationCounterKey(keyBase: string, application: string, generation = 0): string {
  return `${keyBase}${applicationTag(application)}${generationMark(generation)}:${application}`;
}

/**
 * The key prefix of the per-caller counters of one application (`callerCounterKey`) at `generation`:
 * as for `applicationCounterKey`, a reset moves them to fresh keys.
 */
export function callerCounterBase(keyBase: string, generation: number): string {
  return generation === 0 ? keyBase : `${keyBase}${generationMark(generation)}:`;
}

const generationMark = (generation: number) => (generation === 0 ? '' : `#${generation}`);

/** Tags of recent applications: a hash per request would cost more than the rest of the lookup. */
const applicationTags = new Map<string, string>();
const applicationTagsKept = 10_000;

function applicationTag(application: string): string {
  let tag = applicationTags.get(application);
  if (tag === undefined) {
    if (applicationTags.size >= applicationTagsKept) applicationTags.clear();
    tag = `{app:${shortHash(application, 16)}}`;
    applicationTags.set(application, tag);
  }
  return tag;
}

/**
 * The counter of one caller (a client address or header value, see docs/quotas.md) under a restriction
 * counted `by` caller, within `scope` (the application for an application quota, '' for an API quota).
 * Its hash tag is a hash of both, so a cluster spreads callers over its masters; the caller itself, which
 * a client chooses, never enters the key, so neither its length nor its braces can shape it.
 */
export function callerCounterKey(keyBase: string, scope: string, caller: string): string {
  return `${keyBase}{by:${shortHash(`${scope}\n${caller}`, 16)}}`;
}

/** The application a counter key of `applicationCounterKey` belongs to, from what follows `keyBase`. */
export function applicationOfCounter(keyAfterBase: string): string {
  return keyAfterBase.replace(/^\{app:[0-9a-f]+\}(?:#\d+)?:/, '');
}

/**
 * The reset generation of a counter key of `applicationCounterKey` or `callerCounterBase`, from what
 * follows `keyBase`: a usage read counts only the keys of an application's current generation.
 */
export function generationOfCounter(keyAfterBase: string): number {
  const mark = /^(?:\{app:[0-9a-f]+\})?#(\d+):/.exec(keyAfterBase);
  return mark ? Number(mark[1]) : 0;
}

function shortHash(text: string, length: number): string {
  return createHash('sha1').update(text).digest('hex').slice(0, length);
}
