import type { Router } from '../catalog/router.js';
import { verbs, type ApiConfig } from '../config/schema.js';
import { ConfigError } from '../kit/config-error.js';
import { normalizeSegment } from '../kit/normalize-path.js';
import type { CounterState } from '../limiter/counter-store.js';
import type { NamedRestriction } from '../quota/quota-index.js';
import { unitOf, type RestrictionUnit } from '../quota/quota-terms.js';

/**
 * The data plane's usage path (`usagePath`, default `/_quotagate/usage`): a caller reads its own quotas,
 * as GitHub's `GET /rate_limit` lets it, authenticated like any request and never counted. What it reads
 * comes from the counters without charging them; a caller has a small budget of reads of its own, kept
 * in this process, so that the path cannot be used to load the store.
 */

/** Reads a caller may make per budget window, and that window. */
export const usageReadsPerWindow = 10;
export const usageWindowMs = 10_000;
/** Callers whose budget is remembered; beyond it the oldest are forgotten (they start afresh). */
const callersKept = 10_000;

/** The usage path of a config, as the gateway compares request paths with it. */
export class UsagePath {
  /** The path as a request that reaches it is shown to authentication: normalized, `/` and its segments. */
  readonly path: string;

  private constructor(readonly segments: readonly string[]) {
    this.path = `/${segments.join('/')}`;
  }

  /**
   * The usage path of `usagePath` over the catalog `router` routes, or null when turned off.
   * @throws ConfigError when a request to it is a request of the catalog (it would take that away)
   */
  static of(usagePath: string | false, router: Router): UsagePath | null {
    if (usagePath === false) return null;
    const segments = usagePath
      .split('/')
      .filter((segment) => segment !== '')
      .map((segment) => normalizeSegment(segment) ?? segment);
    // Every verb a method may declare (HEAD is routed as GET).
    for (const verb of verbs) {
      const route = router.match(verb, segments, false, '');
      if (route && (route.method || route.api.config.passUndeclared)) {
        const what = route.method ? `its method '${route.method.name}'` : 'passUndeclared';
        throw new ConfigError([
          `usagePath: '${usagePath}' is a path of API '${route.api.config.name}' (${verb}, ${what}): choose another path, or false`,
        ]);
      }
    }
    return new UsagePath(segments);
  }

  /** Whether a request's normalized segments are the usage path. */
  is(segments: readonly string[]): boolean {
    if (segments.length !== this.segments.length) return false;
    for (let i = 0; i < segments.length; i += 1) if (segments[i] !== this.segments[i]) return false;
    return true;
  }
}

/** Per caller, a fixed window of `usageWindowMs` with `usageReadsPerWindow` reads. */
export class UsageBudget {
  private readonly callers = new Map<string, { start: number; reads: number }>();

  /** Takes one read for `caller` at `now`: 0 when it may read, else milliseconds until it may again. */
  take(caller: string, now: number): number {
    let budget = this.callers.get(caller);
    if (!budget || now - budget.start >= usageWindowMs) {
      this.callers.delete(caller);
      if (this.callers.size >= callersKept) this.callers.delete(this.callers.keys().next().value!);
      budget = { start: now, reads: 0 };
      this.callers.set(caller, budget);
    }
    if (budget.reads >= usageReadsPerWindow) return budget.start + usageWindowMs - now;
    budget.reads += 1;
    return 0;
  }
}

/** What a restriction names, by the catalog's names. */
export class CatalogNames {
  private readonly apis: Map<string, { name: string; methods: Map<string, string> }>;

  constructor(apis: readonly ApiConfig[]) {
    this.apis = new Map(
      apis.map((api) => [
        api.id.toLowerCase(),
        {
          name: api.name,
          methods: new Map(api.methods.map((method) => [method.id.toLowerCase(), method.name])),
        },
      ]),
    );
  }

  api(id: string): string {
    return id === '*' ? '*' : (this.apis.get(id)?.name ?? id);
  }

  method(apiId: string, id: string): string {
    return id === '*' ? '*' : (this.apis.get(apiId)?.methods.get(id) ?? id);
  }
}

/** One restriction of the answer. */
export interface RestrictionReading {
  quota: { id: string; name: string };
  index: number;
  api: string;
  method: string;
  verb?: string;
  type: NamedRestriction['type'];
  mode: 'enforce' | 'shadow';
  unit: RestrictionUnit;
  limit: number;
  used: number;
  remaining: number;
  windowSeconds: number;
  resetSeconds: number;
}

/** The answer's restrictions, each read from its counter (`states`, in the same order). */
export function readings(
  restrictions: readonly NamedRestriction[],
  states: readonly CounterState[],
  names: CatalogNames,
): RestrictionReading[] {
  return restrictions.map((restriction, i) => {
    const state = states[i] ?? { used: 0, resetMs: 0 };
    // A calendar window's length is the current one's, which its counter's state says.
    const windowSeconds = Math.ceil((state.windowMs ?? restriction.windowMs) / 1000);
    return {
      quota: { id: restriction.quotaId, name: restriction.quotaName },
      index: restriction.index,
      api: names.api(restriction.api),
      method: names.method(restriction.api, restriction.method),
      ...(restriction.verb ? { verb: restriction.verb } : {}),
      type: restriction.type,
      mode: restriction.shadow ? 'shadow' : 'enforce',
      unit: unitOf(restriction.type),
      limit: restriction.limit,
      used: state.used,
      remaining: Math.max(0, restriction.limit - state.used),
      windowSeconds,
      resetSeconds: Math.ceil(state.resetMs / 1000),
    };
  });
}

/** The enforced restriction with the least room left relative to its limit (its index), or -1. */
export function tightest(restrictions: readonly NamedRestriction[], states: readonly CounterState[]): number {
  let best = -1;
  let bestRoom = Infinity;
  restrictions.forEach((restriction, i) => {
    if (restriction.shadow) return;
    const room = (restriction.limit - (states[i]?.used ?? 0)) / restriction.limit;
    if (room < bestRoom) [best, bestRoom] = [i, room];
  });
  return best;
}
