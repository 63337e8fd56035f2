import { upstreamTargets, type ApiConfig, type MethodConfig } from '../config/schema.js';
import { uniqueLabels } from '../kit/unique-labels.js';
import { normalizeSegment } from '../kit/normalize-path.js';

export interface CompiledApi {
  readonly config: ApiConfig;
  /** What metrics and logs call the API: its name, or its id when another API has the same name. */
  readonly label: string;
  /** What metrics call each method (by id): its name, or its id when another method of the API has it. */
  readonly methodLabels: ReadonlyMap<string, string>;
  /** Upstream origin, e.g. `http://127.0.0.1:9000`: of its first target when it has a pool. */
  readonly upstreamOrigin: string;
  /**
   * The targets of a pool (`upstream: { targets }`), each an origin with its weight, in the config's
   * order; null for the one-URL form, which goes to `upstreamOrigin` alone.
   */
  readonly upstreamTargets: ReadonlyArray<{ readonly origin: string; readonly weight: number }> | null;
  /** Upstream path prefix without a trailing slash ('' for none); a gRPC API's basePath ends it. */
  readonly upstreamPrefix: string;
}

/**
 * A route as matched. `Guard` is what the gateway compiled for each operation (its authenticator), read
 * off the match with no lookup.
 */
export interface RouteMatch<Guard = unknown> {
  api: CompiledApi;
  /** The catalog method, or null for a path or verb of the API that no method declares. */
  method: MethodConfig | null;
  /** What `guardOf` made for the method, or for the API where no method is declared. */
  guard: Guard;
  /**
   * The path as routed, with the query: literal segments in the catalog's spelling, the others as
   * normalized. What an auth plugin's `matchURL` sees.
   */
  path: string;
  /** Path and query to send upstream: the upstream prefix plus `path` below the API's basePath. */
  upstreamTarget: string;
  /** The normalized request segments that were matched. */
  segments: readonly string[];
}

/** Routes a normalized request to the API and method of the catalog. */
export interface Router<Guard = unknown> {
  match(
    verb: string,
    segments: readonly string[],
    trailingSlash: boolean,
    query: string,
  ): RouteMatch<Guard> | null;
  /** The verbs that methods of `match`'s API declare for its path (HEAD where GET is), for `Allow`. */
  allowedVerbs(match: RouteMatch<Guard>): string[];
}

/** What the gateway compiles for an operation: for a method, or for the API's undeclared paths (null). */
export type GuardOf<Guard> = (api: ApiConfig, method: MethodConfig | null) => Guard;

interface CompiledMethod<Guard> {
  config: MethodConfig;
  guard: Guard;
  /** One entry per segment: the literal as the catalog spells it, or null for a `{param}`. */
  pattern: Array<string | null>;
  /** The literals as compared: lower case unless the API is case-sensitive. */
  keys: Array<string | null>;
}

interface ApiRoute<Guard> {
  api: CompiledApi;
  /** The guard of a path or verb no method declares (`passUndeclared`). */
  guard: Guard;
  base: string[];
  /** `base` as a path (`/pets`), or '' for the root. */
  basePath: string;
  baseKeys: string[];
  caseSensitive: boolean;
  methodsByVerb: Map<string, Array<CompiledMethod<Guard>>>;
}

const splitPath = (path: string) => path.split('/').filter((segment) => segment !== '');

/**
 * Concrete paths match before templated ones, whatever the order of the catalog (OpenAPI 3, Paths
 * Object): of two templates that can match the same request (as long as each other), the one that is
 * literal at the leftmost position where they differ wins, as fastify's find-my-way tries a node's
 * static child before its parameter. `/findByStatus` wins over `/{petId}`, `/mine/{a}/{b}` over
 * `/{id}/photos/{b}`. Templates of other lengths never match the same request; ordering them by length
 * first keeps the comparison a total order, so the sort cannot depend on where they were declared.
 */
function bySpecificity(a: CompiledMethod<unknown>, b: CompiledMethod<unknown>): number {
  if (a.pattern.length !== b.pattern.length) return a.pattern.length - b.pattern.length;
  for (let i = 0; i < a.pattern.length; i += 1) {
    const aLiteral = a.pattern[i] !== null;
    const bLiteral = b.pattern[i] !== null;
    if (aLiteral !== bLiteral) return aLiteral ? -1 : 1;
  }
  return 0;
}

/** A configured literal segment as requests spell it (config validation has refused any other). */
const literal = (segment: string) => normalizeSegment(segment) ?? segment;

function compileApi<Guard>(config: ApiConfig, label: string, guardOf: GuardOf<Guard>): ApiRoute<Guard> {
  const targets = upstreamTargets(config.upstream).map(({ url, weight }) => ({ url: new URL(url), weight }));
  // The config check holds every target of a pool to the first one's path.
  const upstream = targets[0]!.url;
  const key = (text: string) => (config.caseSensitive ? text : text.toLowerCase());
  const methodsByVerb = new Map<string, Array<CompiledMethod<Guard>>>();
  for (const method of config.methods) {
    const pattern = splitPath(method.path).map((segment) =>
      segment.startsWith('{') ? null : literal(segment),
    );
    const list = methodsByVerb.get(method.verb) ?? [];
    list.push({
      config: method,
      guard: guardOf(config, method),
      pattern,
      keys: pattern.map((text) => (text === null ? null : key(text))),
    });
    methodsByVerb.set(method.verb, list);
  }
  for (const list of methodsByVerb.values()) list.sort(bySpecificity);
  const base = splitPath(config.basePath).map(literal);
  const basePath = base.length > 0 ? `/${base.join('/')}` : '';
  const prefix = upstream.pathname.replace(/\/+$/, '');
  return {
    api: {
      config,
      label,
      methodLabels: uniqueLabels(config.methods),
      upstreamOrigin: upstream.origin,
      upstreamTargets:
        typeof config.upstream === 'string'
          ? null
          : targets.map(({ url, weight }) => ({ origin: url.origin, weight })),
      // A gRPC call's path is `/<package.Service>/<Method>` from the server's root (gRPC over HTTP/2,
      // "Path"): the service that basePath names goes upstream with it, and the config refuses a path
      // in the upstream URL of a gRPC API.
      upstreamPrefix: config.protocol === 'grpc' ? basePath : prefix,
    },
    guard: guardOf(config, null),
    base,
    basePath,
    baseKeys: base.map(key),
    caseSensitive: config.caseSensitive,
    methodsByVerb,
  };
}

/** Whether `keys` match the request's segments from `offset` on, to the end. */
function matches(keys: ReadonlyArray<string | null>, segments: readonly string[], offset: number): boolean {
  if (keys.length !== segments.length - offset) return false;
  for (let i = 0; i < keys.length; i += 1) {
    const key = keys[i];
    if (key !== null && key !== segments[offset + i]) return false;
  }
  return true;
}

/** Whether `keys` are a prefix of the request's segments. */
function startsWith(keys: readonly string[], segments: readonly string[]): boolean {
  if (keys.length > segments.length) return false;
  for (let i = 0; i < keys.length; i += 1) if (keys[i] !== segments[i]) return false;
  return true;
}

/**
 * Compiles the catalog once. The longest matching basePath wins; literal segments match regardless of
 * case unless the API is `caseSensitive` (case-insensitive frameworks would route `/findbystatus` to
 * findByStatus, so counting it as `/{petId}` would count another operation than the one that runs).
 */
export function compileCatalog(apis: readonly ApiConfig[]): Router<null>;
export function compileCatalog<Guard>(apis: readonly ApiConfig[], guardOf: GuardOf<Guard>): Router<Guard>;
export function compileCatalog<Guard>(
  apis: readonly ApiConfig[],
  guardOf: GuardOf<Guard | null> = () => null,
): Router<Guard | null> {
  const labels = uniqueLabels(apis);
  const routes = apis
    .map((api) => compileApi(api, labels.get(api.id)!, guardOf))
    .sort((a, b) => b.base.length - a.base.length);
  const anyCaseInsensitive = routes.some((route) => !route.caseSensitive);
  const byApi = new Map(routes.map((route) => [route.api, route]));

  /** The method of `route` whose pattern matches, in the request's segments as compared. */
  const methodFor = (
    route: ApiRoute<Guard | null>,
    verb: string,
    segments: readonly string[],
    lower: readonly string[],
  ) => {
    const candidates = route.methodsByVerb.get(verb);
    if (!candidates) return null;
    const compared = route.caseSensitive ? segments : lower;
    for (const candidate of candidates)
      if (matches(candidate.keys, compared, route.base.length)) return candidate;
    return null;
  };

  /** The API whose basePath the request's segments begin with (the longest, as `routes` is sorted). */
  const routeOf = (segments: readonly string[], lower: readonly string[]) => {
    for (const route of routes)
      if (startsWith(route.baseKeys, route.caseSensitive ? segments : lower)) return route;
    return null;
  };

  return {
    match(verb, segments, trailingSlash, query) {
      const lower = anyCaseInsensitive ? segments.map((segment) => segment.toLowerCase()) : segments;
      const route = routeOf(segments, lower);
      if (!route) return null;
      // HEAD is GET without a body (RFC 9110 §9.3.2), so it is routed, authorized and counted as GET.
      const method = methodFor(route, verb === 'HEAD' ? 'GET' : verb, segments, lower);
      // The catalog's spelling of the literals goes upstream, so a case-sensitive upstream runs the very
      // operation that was authorized and counted.
      let tail = '';
      for (let i = route.base.length; i < segments.length; i += 1) {
        tail += `/${method?.pattern[i - route.base.length] ?? segments[i]!}`;
      }
      if (tail !== '' && trailingSlash) tail += '/';
      return {
        api: route.api,
        method: method?.config ?? null,
        guard: method ? method.guard : route.guard,
        path: (`${route.basePath}${tail}` || '/') + query,
        upstreamTarget: (`${route.api.upstreamPrefix}${tail}` || '/') + query,
        segments,
      };
    },
    allowedVerbs(match) {
      const route = byApi.get(match.api)!;
      const { segments } = match;
      const lower = segments.map((segment) => segment.toLowerCase());
      const verbs = [...route.methodsByVerb.keys()].filter((verb) => methodFor(route, verb, segments, lower));
      return verbs.includes('GET') ? [...verbs, 'HEAD'] : verbs;
    },
  };
}
