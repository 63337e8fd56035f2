import type { QuotaRecord } from './quota-schema.js';

/**
 * Plans (tiers): an APPLICATION quota that no application owns is a plan, and an application is put on
 * one by a record of its own that names the plan instead of holding restrictions. Every application on a
 * plan is counted on its own against the plan's restrictions, so a change of the plan changes them all.
 * The stores keep the rules below atomic with their writes: a membership names a plan that exists, and
 * a plan that applications are on is neither deleted nor made into something else.
 */

/** Whether `record` can be a plan: APPLICATION, owned by no application, not a well-known quota. */
export function isPlan(record: QuotaRecord): boolean {
  return (
    record.quota.type === 'APPLICATION' &&
    record.application === undefined &&
    record.plan === undefined &&
    !record.quota.system
  );
}

/** Why quota `id` (stored as `record`, or missing) cannot be a plan; undefined when it can. */
export function notAPlan(id: string, record: QuotaRecord | undefined): string | undefined {
  if (!record) return `no quota with id '${id}'`;
  if (record.quota.system) return `quota '${id}' is a well-known quota, not a plan`;
  if (record.quota.type !== 'APPLICATION') return `quota '${id}' is of type ${record.quota.type}, not a plan`;
  if (record.application !== undefined)
    return `quota '${id}' is the own quota of application '${record.application}', not a plan`;
  if (record.plan !== undefined) return `'${id}' puts an application on a plan; it is no plan itself`;
  return undefined;
}

/** The record that puts `application` on plan `plan`: no restrictions of its own. */
export function membershipRecord(id: string, application: string, plan: string): QuotaRecord {
  return {
    quota: {
      id,
      type: 'APPLICATION',
      name: 'Plan membership',
      description: `Counts the application by the restrictions of the plan ${plan}`,
      restrictions: [],
      system: false,
    },
    application,
    plan,
  };
}

/** How many of `records` put an application on each plan, by plan id. */
export function membersByPlan(records: Iterable<QuotaRecord>): Map<string, number> {
  const members = new Map<string, number>();
  for (const record of records)
    if (record.plan !== undefined) members.set(record.plan, (members.get(record.plan) ?? 0) + 1);
  return members;
}

/** The applications `records` put on plan `id`, in the order of their ids. */
export function membersOf(records: Iterable<QuotaRecord>, id: string): string[] {
  const members: string[] = [];
  for (const record of records) if (record.plan === id) members.push(record.application ?? '');
  return members.sort();
}

/** How many applications on a plan a refusal names; it counts the others. */
const namedMembers = 10;

/**
 * What a write that would leave applications on no plan is told: who they are (`named`, the first
 * `namedMembers` of `count`), and the way to take each off, which works whatever says the application
 * no longer exists (an application gone from conf/, an LDAP entry gone from the directory).
 */
export function planInUse(id: string, named: readonly string[], count = named.length): string {
  const applications = count === 1 ? '1 application is' : `${count} applications are`;
  const listed = named
    .slice(0, namedMembers)
    .map((application) => `'${application}'`)
    .join(', ');
  const others = count > namedMembers ? `, and ${count - namedMembers} more` : '';
  return `quota '${id}' is a plan that ${applications} on (${listed}${others}); take each off it first with DELETE /applications/{id}/quota (an application gone from conf/ or from the directory too), or put it on another plan`;
}

/**
 * Why writing `next` under `id` into `records` (or removing `id`, when `next` is undefined) breaks the
 * rules of plans: undefined when it keeps them. The memory store asks this; Redis's scripts ask the same
 * in plan-rules.lua.
 */
export function planRuleBroken(
  records: ReadonlyMap<string, QuotaRecord>,
  id: string,
  next: QuotaRecord | undefined,
): string | undefined {
  if (next?.plan !== undefined) {
    const problem = notAPlan(next.plan, records.get(next.plan));
    if (problem) return problem;
  }
  if (next !== undefined && isPlan(next)) return undefined;
  const members = membersOf(records.values(), id);
  return members.length === 0 ? undefined : planInUse(id, members);
}
