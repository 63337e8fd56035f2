import type { ApiConfig, MethodConfig } from '../config/schema.js';
import { normalizeSegment } from './normalize-path.js';

export interface CompiledApi {
  readonly config: ApiConfig;
  /** Upstream origin, e.g. `http://127.0.0.1:9000`. */
  readonly upstreamOrigin: string;
  /** Upstream path prefix without a trailing slash ('' for none). */
  readonly upstreamPrefix: string;
}

export interface RouteMatch {
  api: CompiledApi;
  /** The catalog method, or null for a path inside the API that no method declares. */
  method: MethodConfig | null;
  /** Path and query to send upstream: the upstream prefix plus the path below the API's basePath. */
  upstreamTarget: string;
}

/** Routes a normalized request to the API and method of the catalog. */
export interface Router {
  match(verb: string, segments: readonly string[], trailingSlash: boolean, query: string): RouteMatch | null;
}

interface CompiledMethod {
  config: MethodConfig;
  /** One entry per segment: the literal text, or null for a `{param}`. */
  pattern: Array<string | null>;
}

interface ApiRoute {
  api: CompiledApi;
  base: string[];
  methodsByVerb: Map<string, CompiledMethod[]>;
}

const splitPath = (path: string) => path.split('/').filter((segment) => segment !== '');

/** Literal segments outrank parameters, position by position: `/findByStatus` wins over `/{petId}`. */
function bySpecificity(a: CompiledMethod, b: CompiledMethod): number {
  for (let i = 0; i < a.pattern.length; i += 1) {
    const aLiteral = a.pattern[i] !== null;
    const bLiteral = b.pattern[i] !== null;
    if (aLiteral !== bLiteral) return aLiteral ? -1 : 1;
  }
  return 0;
}

function compileApi(config: ApiConfig): ApiRoute {
  const upstream = new URL(config.upstream);
  const methodsByVerb = new Map<string, CompiledMethod[]>();
  for (const method of config.methods) {
    const pattern = splitPath(method.path).map((segment) =>
      segment.startsWith('{') ? null : normalizeSegment(segment),
    );
    const list = methodsByVerb.get(method.verb) ?? [];
    list.push({ config: method, pattern });
    methodsByVerb.set(method.verb, list);
  }
  for (const list of methodsByVerb.values()) list.sort(bySpecificity);
  return {
    api: {
      config,
      upstreamOrigin: upstream.origin,
      upstreamPrefix: upstream.pathname.replace(/\/+$/, ''),
    },
    base: splitPath(config.basePath).map(normalizeSegment),
    methodsByVerb,
  };
}

function matches(
  pattern: ReadonlyArray<string | null>,
  segments: readonly string[],
  offset: number,
): boolean {
  if (pattern.length !== segments.length - offset) return false;
  return pattern.every((literal, i) => literal === null || literal === segments[offset + i]);
}

/** Compiles the catalog once; the longest matching basePath wins. */
export function compileCatalog(apis: readonly ApiConfig[]): Router {
  const routes = apis.map(compileApi).sort((a, b) => b.base.length - a.base.length);
  return {
    match(verb, segments, trailingSlash, query) {
      const route = routes.find((candidate) =>
        matches(candidate.base, segments.slice(0, candidate.base.length), 0),
      );
      if (!route) return null;
      // HEAD is GET without a body (RFC 9110 §9.3.2), so it is routed, authorized and counted as GET.
      const lookupVerb = verb === 'HEAD' ? 'GET' : verb;
      const method =
        route.methodsByVerb
          .get(lookupVerb)
          ?.find((candidate) => matches(candidate.pattern, segments, route.base.length)) ?? null;
      const rest = segments.slice(route.base.length);
      const below = rest.length > 0 ? `/${rest.join('/')}${trailingSlash ? '/' : ''}` : '';
      const path = `${route.api.upstreamPrefix}${below}` || '/';
      return { api: route.api, method: method?.config ?? null, upstreamTarget: path + query };
    },
  };
}
