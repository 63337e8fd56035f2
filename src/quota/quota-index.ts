import { uniqueLabels } from '../kit/unique-labels.js';
import {
  applicationDefaultQuotaId,
  calendarOf,
  windowMs,
  type Restriction,
  type StoredQuota,
} from './model.js';
import type { CalendarSpec } from '../kit/calendar-window.js';
import { unitsOf } from './quota-schema.js';
import {
  applicationCounterKey,
  callerCounterBase,
  callerCounterKey,
  counterBasesOf,
} from './restriction-counters.js';
import { parseUnitPaths, type UnitPaths } from './unit-paths.js';
import type { CounterAddition, CounterRef, CounterSpec, CounterState } from '../limiter/counter-store.js';

/** A restriction ready to be checked: its counter, its limit in units, its window. */
export interface ApplicableRestriction {
  /**
   * Counter key: what the restriction counts, whatever its place in the quota (`counterBasesOf`), and per
   * application for application quotas. Enforced twins share it.
   */
  counterKey: string;
  quotaId: string;
  /** What metrics call the quota: its name, or its id when another quota has the same name. */
  quotaLabel: string;
  /** Position of the restriction in its quota. */
  index: number;
  type: Restriction['type'];
  /** Messages for throttle, bytes for throttlemb, units for throttleunits. */
  limit: number;
  /** The window's length; for a calendar window, its longest (the current one's is the store's to say). */
  windowMs: number;
  /** A calendar window (`window: calendar`), made once per restriction; undefined for a sliding one. */
  calendar: CalendarSpec | undefined;
  /** Counted as if enforced, never refusing (`mode: shadow`). */
  shadow: boolean;
  /** throttleunits: the response header or trailer (lower case) that says what an exchange cost. */
  unitHeader: string | null;
  /** throttleunits: the paths in the answer body that say it, parsed once; null when it reads none. */
  unitBody: UnitPaths | null;
  /** throttleunits: what an exchange costs when neither says a whole number. */
  unitDefault: number;
  /**
   * Whose count each count is (`client` or `header:<name>`), or undefined for one count (per
   * application for application quotas). With it, `counterKey` is a prefix, and `callerScope` the
   * application ('' for an API quota): see `QuotaChecks.forCaller`.
   */
  by: string | undefined;
  callerScope: string;
  /** The quota's own alert thresholds (percentages of `limit`), when it sets them (docs/quotas.md, "Alerts"). */
  alertThresholds?: readonly number[];
}

/** A restriction as the caller's usage lists it: what it counts, and what it names. */
export interface NamedRestriction extends ApplicableRestriction {
  quotaName: string;
  /** Catalog ids (lower case), or `*`. */
  api: string;
  method: string;
  verb: string | undefined;
}

interface CompiledRestriction extends Omit<NamedRestriction, 'counterKey' | 'callerScope'> {
  /**
   * Counter key of an API-type restriction, or the key prefix of an application quota's counters (one
   * per application, see `applicationCounterKey`).
   */
  keyBase: string;
}

/** @param perApplication whether the restrictions count each application apart */
function compile(record: StoredQuota, perApplication: boolean, label: string): CompiledRestriction[] {
  const keyBases = counterBasesOf(record.quota, perApplication);
  return record.quota.restrictions.map((restriction, index) => ({
    keyBase: keyBases[index]!,
    quotaId: record.quota.id,
    quotaLabel: label,
    index,
    type: restriction.type,
    limit: unitsOf(restriction.config),
    windowMs: windowMs(restriction.config),
    calendar: calendarOf(restriction.config),
    shadow: restriction.mode === 'shadow',
    unitHeader: restriction.config.header ?? null,
    unitBody: restriction.config.body === undefined ? null : parseUnitPaths(restriction.config.body),
    unitDefault: Number(restriction.config.default ?? 0),
    by: restriction.by,
    api: restriction.api,
    method: restriction.method,
    verb: restriction.verb,
    quotaName: record.quota.name,
    ...(record.quota.thresholds === undefined ? {} : { alertThresholds: record.quota.thresholds }),
  }));
}

/**
 * What the quota step does for one (api, method, verb, application): the restrictions to check, made
 * once and reused by every request that shares them, so a request builds no list of its own. Enforced
 * restrictions are checked together, all or nothing; each shadow restriction is checked on its own once
 * they admit the request, so that it counts exactly what it would admit if it were enforced.
 */
export class QuotaChecks {
  /** The enforced restrictions, whose checks decide the request. */
  readonly restrictions: readonly ApplicableRestriction[];
  /** The shadow restrictions, which count and report but never refuse. */
  readonly shadows: readonly ApplicableRestriction[];
  /**
   * For each enforced restriction, the position of its counter among the checks of `specs`: enforced
   * twins share one counter, so one check, under the tightest of their limits.
   */
  readonly counterOf: readonly number[];
  /** The enforced throttlemb counters: charged the declared body up front and the measured bytes at the end. */
  readonly byteRestrictions: readonly ApplicableRestriction[];
  /** The position of each of `byteRestrictions` among the checks of `specs`. */
  private readonly bytePositions: readonly number[];
  /** The enforced throttleunits counters: charged, at the end, what the upstream's answer says it cost. */
  readonly unitRestrictions: readonly ApplicableRestriction[];
  /** The keys of the enforced concurrency counters: a slot each while an admitted request is in flight. */
  readonly slotKeys: readonly string[];
  /** The smallest enforced byte limit: a declared body larger than it never fits (Infinity without one). */
  readonly largestBody: number;
  /** One per counter of the enforced restrictions, with the tightest limit of the twins that share it. */
  private readonly counters: readonly ApplicableRestriction[];
  /** Whether a restriction is counted by caller: `forCaller` then makes each request's checks. */
  readonly byCaller: boolean;
  /** The counter checks of a request that declares no body: a message each, room for a byte. */
  private readonly bodiless: readonly CounterSpec[];
  /** The same for the shadow restrictions, one check each. */
  private readonly bodilessShadows: ReadonlyArray<readonly CounterSpec[]>;

  constructor(readonly all: readonly ApplicableRestriction[]) {
    this.byCaller = all.some((restriction) => restriction.by !== undefined);
    this.restrictions = all.filter((restriction) => !restriction.shadow);
    this.shadows = all.filter((restriction) => restriction.shadow);
    const counters: ApplicableRestriction[] = [];
    const positions = new Map<string, number>();
    this.counterOf = this.restrictions.map((restriction) => {
      const position = positions.get(restriction.counterKey);
      if (position === undefined) {
        positions.set(restriction.counterKey, counters.length);
        return counters.push(restriction) - 1;
      }
      const counter = counters[position]!;
      if (restriction.limit < counter.limit) counters[position] = { ...counter, limit: restriction.limit };
      return position;
    });
    this.counters = counters;
    this.byteRestrictions = counters.filter((counter) => counter.type === 'throttlemb');
    this.bytePositions = this.byteRestrictions.map((restriction) => counters.indexOf(restriction));
    this.unitRestrictions = counters.filter((counter) => counter.type === 'throttleunits');
    this.slotKeys = counters
      .filter((counter) => counter.type === 'concurrency')
      .map((counter) => counter.counterKey);
    this.largestBody = Math.min(...this.byteRestrictions.map((restriction) => restriction.limit));
    this.bodiless = checksOf(counters, 0);
    this.bodilessShadows = this.shadowChecksOf(0);
  }

  /**
   * The checks of one request whose restrictions are counted by caller: each such restriction on the
   * counter of the caller that `callerOf` names for it. Made per request, and only when `byCaller`.
   */
  forCaller(callerOf: CallerOf): QuotaChecks {
    return new QuotaChecks(onCallerCounters(this.all, callerOf));
  }

  /**
   * The counter checks of the enforced restrictions for a request that declares `declaredBytes` of body:
   * one per counter (see `counterOf`), so that no counter is charged twice for one request.
   */
  specs(declaredBytes: number): readonly CounterSpec[] {
    return declaredBytes === 0 ? this.bodiless : checksOf(this.counters, declaredBytes);
  }

  /** The states of a decision on `specs`, one per enforced restriction, in the order of `restrictions`. */
  statesOf(states: readonly CounterState[]): readonly CounterState[] {
    return this.counters.length === this.restrictions.length
      ? states
      : this.counterOf.map((position) => states[position]!);
  }

  /**
   * The states of a decision on `specs`, one per counter of `byteRestrictions`, in their order (none
   * where the decision said nothing of them: a policy admitted it).
   */
  byteStatesOf(states: readonly CounterState[]): ReadonlyArray<CounterState | undefined> {
    return this.bytePositions.map((position) => states[position]);
  }

  /** The counter checks of the shadow restrictions, each alone in its list, as `specs` makes them. */
  shadowChecks(declaredBytes: number): ReadonlyArray<readonly CounterSpec[]> {
    return declaredBytes === 0 ? this.bodilessShadows : this.shadowChecksOf(declaredBytes);
  }

  private shadowChecksOf(declaredBytes: number): CounterSpec[][] {
    return checksOf(this.shadows, declaredBytes).map((check) => [{ ...check, shadow: true }]);
  }
}

/** A restriction counted `by` caller. */
export type CallerRestriction = ApplicableRestriction & { by: string };

/** The caller a restriction counted `by` caller counts a request for (a client address, a header value). */
export type CallerOf = (restriction: CallerRestriction) => string;

const countedByCaller = (restriction: ApplicableRestriction): restriction is CallerRestriction =>
  restriction.by !== undefined;

/** `restrictions`, each counted by caller on the counter of the caller `callerOf` names for it. */
export function onCallerCounters<T extends ApplicableRestriction>(
  restrictions: readonly T[],
  callerOf: CallerOf,
): T[] {
  return restrictions.map((restriction) =>
    countedByCaller(restriction)
      ? {
          ...restriction,
          counterKey: callerCounterKey(
            restriction.counterKey,
            restriction.callerScope,
            callerOf(restriction),
          ),
        }
      : restriction,
  );
}

/** The counter of a restriction, to read: with its calendar window when it has one. */
export const counterRefOf = ({ counterKey, windowMs, calendar }: ApplicableRestriction): CounterRef =>
  calendar ? { key: counterKey, windowMs, calendar } : { key: counterKey, windowMs };

/** `amount` to add to the counter of a restriction. */
export const additionTo = (restriction: ApplicableRestriction, amount: number): CounterAddition => ({
  ...counterRefOf(restriction),
  amount,
});

/**
 * A throttle charges one message; a throttlemb charges the declared body and needs room for a byte; a
 * throttleunits charges nothing yet (the answer says what the exchange cost) and needs room for a unit;
 * a concurrency restriction takes one slot (its window is 0: see `CounterSpec`).
 */
function checksOf(restrictions: readonly ApplicableRestriction[], declaredBytes: number): CounterSpec[] {
  return restrictions.map(({ counterKey, limit, windowMs, calendar, type }) => {
    const bytes = type === 'throttlemb';
    const spec: CounterSpec = {
      key: counterKey,
      limit,
      windowMs,
      cost: bytes ? declaredBytes : type === 'throttleunits' ? 0 : 1,
      need: bytes ? Math.max(declaredBytes, 1) : 1,
    };
    if (calendar) spec.calendar = calendar;
    return spec;
  });
}

const noRestrictions = new QuotaChecks([]);

/** The checks of one (api, method, verb): the API-wide ones, and those of each application seen. */
interface ChecksOfRoute {
  apiWide: QuotaChecks;
  byApplication: Map<string, QuotaChecks>;
}

/** Checks kept per route for recent applications: beyond it they are made again. */
const applicationChecksKept = 10_000;

/** The restrictions of `list` that apply to a request of `api` and `method` (catalog ids, any case) and `verb`. */
function matching(
  list: readonly CompiledRestriction[],
  api: string,
  method: string | null,
  verb: string,
): CompiledRestriction[] {
  const [apiId, methodId] = [api.toLowerCase(), method?.toLowerCase() ?? null];
  return list.filter(
    (restriction) =>
      (restriction.api === '*' || restriction.api === apiId) &&
      (restriction.method === '*' || restriction.method === methodId) &&
      (restriction.verb === undefined || restriction.verb === verb),
  );
}

/**
 * How many times each counter of an application was reset: application → the `keyBase` of a restriction
 * (`counterBasesOf`) → its generation (see `applicationCounterKey`). A counter not named is at 0.
 */
export type ResetGenerations = ReadonlyMap<string, ReadonlyMap<string, number>>;

const noResets: ResetGenerations = new Map();

/** The restriction as the request path checks it: its counter for `application`, nothing it names. */
const applicable = (
  restriction: CompiledRestriction,
  application?: string,
  generation = 0,
): ApplicableRestriction => {
  const {
    api: _api,
    method: _method,
    verb: _verb,
    quotaName: _name,
    ...rest
  } = named(restriction, application, generation);
  return rest;
};

/**
 * The restriction with its counter for `application` (none: an API-wide one) at its reset `generation`,
 * and what it names.
 */
const named = (restriction: CompiledRestriction, application?: string, generation = 0): NamedRestriction => {
  const { keyBase, ...rest } = restriction;
  let counterKey = keyBase;
  if (application !== undefined) {
    counterKey =
      restriction.by === undefined
        ? applicationCounterKey(keyBase, application, generation)
        : callerCounterBase(keyBase, generation);
  }
  return { ...rest, counterKey, callerScope: application ?? '' };
};

/**
 * The quota definitions compiled for the request path: which restrictions apply to a request. Built
 * once per change of the definitions, never read from the store per request.
 */
export class QuotaIndex {
  private readonly apiWide: CompiledRestriction[];
  private readonly byApplication: Map<string, CompiledRestriction[]>;
  private readonly applicationDefault: CompiledRestriction[];
  /** Checks by api id, method id ('' for none) and verb, as the router spells them: three map lookups. */
  private readonly routes = new Map<string, Map<string, Map<string, ChecksOfRoute>>>();

  /** @param resets the reset generations of the applications' counters (none: every counter at 0) */
  constructor(
    records: readonly StoredQuota[],
    private readonly resets: ResetGenerations = noResets,
  ) {
    const labels = uniqueLabels(records.map((record) => record.quota));
    const compiled = (record: StoredQuota, perApplication: boolean) =>
      compile(record, perApplication, labels.get(record.quota.id)!);
    this.apiWide = records
      .filter((record) => record.quota.type === 'API')
      .flatMap((record) => compiled(record, false));
    // A plan's restrictions are compiled once, for all the applications on it; a membership whose plan
    // is not in `records` (refused as stored) leaves its application to the Application Default.
    const byId = new Map(records.map((record) => [record.quota.id, record]));
    const plans = new Map<string, CompiledRestriction[]>();
    const restrictionsOf = (record: StoredQuota): CompiledRestriction[] | undefined => {
      if (record.plan === undefined) return compiled(record, true);
      const plan = byId.get(record.plan);
      if (!plan) return undefined;
      let restrictions = plans.get(plan.quota.id);
      if (!restrictions) plans.set(plan.quota.id, (restrictions = compiled(plan, true)));
      return restrictions;
    };
    this.byApplication = new Map();
    for (const record of records) {
      const restrictions = record.application === undefined ? undefined : restrictionsOf(record);
      if (restrictions) this.byApplication.set(record.application!, restrictions);
    }
    const fallback = records.find((record) => record.quota.id === applicationDefaultQuotaId);
    this.applicationDefault = fallback ? compiled(fallback, true) : [];
  }

  /**
   * The checks of a request: the restrictions of every API-type quota that match (all traffic counts
   * together), and those of the application's own quota or of the plan it is on, or else of the
   * Application Default (counted per application). Without an application, only the API-type ones. Made on first use, then reused.
   * @param api the catalog api id
   * @param method the catalog method id, or null for a path no method declares
   * @param verb the verb as routed (HEAD counts as GET)
   */
  checksFor(api: string, method: string | null, verb: string, application: string | undefined): QuotaChecks {
    let byMethod = this.routes.get(api);
    if (!byMethod) this.routes.set(api, (byMethod = new Map()));
    let byVerb = byMethod.get(method ?? '');
    if (!byVerb) byMethod.set(method ?? '', (byVerb = new Map()));
    let route = byVerb.get(verb);
    if (!route) byVerb.set(verb, (route = this.checksOfRoute(api, method, verb)));
    if (application === undefined) return route.apiWide;
    let checks = route.byApplication.get(application);
    if (!checks) {
      if (route.byApplication.size >= applicationChecksKept) route.byApplication.clear();
      checks = this.applicationChecks(route.apiWide, api, method, verb, application);
      route.byApplication.set(application, checks);
    }
    return checks;
  }

  private checksOfRoute(api: string, method: string | null, verb: string): ChecksOfRoute {
    const restrictions = matching(this.apiWide, api, method, verb).map((restriction) =>
      applicable(restriction),
    );
    return {
      apiWide: restrictions.length === 0 ? noRestrictions : new QuotaChecks(restrictions),
      byApplication: new Map(),
    };
  }

  private applicationChecks(
    apiWide: QuotaChecks,
    api: string,
    method: string | null,
    verb: string,
    application: string,
  ): QuotaChecks {
    const own = this.byApplication.get(application) ?? this.applicationDefault;
    const generations = this.resets.get(application);
    const perApplication = matching(own, api, method, verb).map((restriction) =>
      applicable(restriction, application, generations?.get(restriction.keyBase) ?? 0),
    );
    return perApplication.length === 0 ? apiWide : new QuotaChecks([...apiWide.all, ...perApplication]);
  }

  /**
   * Every restriction that can apply to a request of `application` (none: a caller without one), on any
   * route: those of every API-type quota, and those of its own quota, its plan or the Application
   * Default, with the counters they keep for it.
   */
  restrictionsFor(application: string | undefined): NamedRestriction[] {
    const own =
      application === undefined
        ? []
        : (this.byApplication.get(application) ?? this.applicationDefault).map((restriction) =>
            named(restriction, application, this.generation(application, restriction.keyBase)),
          );
    return [...this.apiWide.map((restriction) => named(restriction)), ...own];
  }

  /** The reset generation of the counter of `application` under the restriction keyed by `keyBase`. */
  generation(application: string, keyBase: string): number {
    return this.resets.get(application)?.get(keyBase) ?? 0;
  }

  /** Counter key (or key prefix, for application quotas) and window of every restriction of a quota. */
  countersOf(quotaId: string): Array<{
    index: number;
    keyBase: string;
    windowMs: number;
    calendar: CalendarSpec | undefined;
    limit: number;
  }> {
    // Applications on one plan share its restrictions: each is listed once.
    const lists = new Set([this.apiWide, this.applicationDefault, ...this.byApplication.values()]);
    const all = [...lists].flat();
    return all
      .filter((restriction) => restriction.quotaId === quotaId)
      .map(({ index, keyBase, windowMs: window, calendar, limit }) => ({
        index,
        keyBase,
        windowMs: window,
        calendar,
        limit,
      }));
  }
}
