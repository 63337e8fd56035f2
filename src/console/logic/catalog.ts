/**
 * The catalog as the console shows it, read from the catalog's OpenAPI document
 * (`/apis/openapi.json`): each API with its methods, by name, and what "try it" needs of each.
 */
export interface CatalogMethod {
  id: string;
  name: string;
  verb: string;
  /** The whole path on the gateway, with `{parameters}`. */
  path: string;
  description: string;
  /** Names of the path's parameters, in order. */
  parameters: string[];
  /** How a client calls it: plain HTTP (what "try it" sends), gRPC over HTTP/2, or a WebSocket. */
  protocol: CallProtocol;
  /** The scheme "try it" sends its request with: the method's own, or the catalog's. */
  authType: string;
}

export type CallProtocol = 'http' | 'grpc' | 'websocket';

export interface CatalogApi {
  id: string;
  name: string;
  methods: CatalogMethod[];
}

export interface Catalog {
  apis: CatalogApi[];
  /** The scheme that authenticates the data plane (APIKeyAuthType). */
  authType: string;
  /** The data plane's address as the document states it (`http://127.0.0.1:8080`). */
  server: string;
}

interface OpenApiOperation {
  summary?: string;
  description?: string;
  tags?: string[];
  'x-quotagate-api-id'?: string;
  'x-quotagate-method-id'?: string;
  'x-quotagate-protocol'?: string;
  /** The operation's own scheme, or list of schemes, where it has one. */
  'x-quotagate-auth'?: string | string[];
}

interface OpenApiServer {
  url?: string;
  variables?: Record<string, { default?: string }>;
}

const verbs = ['get', 'post', 'put', 'patch', 'delete', 'options', 'head'];

/** The APIs of the document, in its order, with their methods in the order of their paths. */
export function catalogFromOpenApi(document: unknown): Catalog {
  const doc = (document ?? {}) as {
    paths?: Record<string, Record<string, OpenApiOperation>>;
    servers?: OpenApiServer[];
    'x-quotagate-auth'?: string;
  };
  const apis = new Map<string, CatalogApi>();
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const verb of verbs) {
      const operation = operations[verb];
      const apiId = operation?.['x-quotagate-api-id'];
      const methodId = operation?.['x-quotagate-method-id'];
      if (!operation || !apiId || !methodId) continue;
      let api = apis.get(apiId);
      if (!api) {
        api = { id: apiId, name: operation.tags?.[0] ?? apiId, methods: [] };
        apis.set(apiId, api);
      }
      api.methods.push({
        id: methodId,
        name: operation.summary ?? methodId,
        verb: verb.toUpperCase(),
        path,
        description: operation.description ?? '',
        parameters: [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!),
        protocol: protocolOf(operation['x-quotagate-protocol']),
        authType: tryScheme(operation['x-quotagate-auth'] ?? doc['x-quotagate-auth'] ?? 'none'),
      });
    }
  }
  return {
    apis: [...apis.values()],
    authType: doc['x-quotagate-auth'] ?? 'none',
    server: serverUrl(doc.servers?.[0]),
  };
}

/**
 * The scheme of a list that "try it" sends with: a key scheme, for which the gateway adds the project's
 * key and the form asks nothing, else the first listed (the admin API picks the same).
 */
export function tryScheme(auth: string | readonly string[]): string {
  if (typeof auth === 'string') return auth;
  return auth.find((scheme) => scheme === 'basic' || scheme === 'apikey') ?? auth[0] ?? 'none';
}

function protocolOf(value: string | undefined): CallProtocol {
  return value === 'grpc' || value === 'websocket' ? value : 'http';
}

/** A server's URL with its variables at their defaults (`http://{host}:8080` → `http://127.0.0.1:8080`). */
function serverUrl(server: OpenApiServer | undefined): string {
  const url = server?.url ?? '';
  return url.replace(/\{([^}]+)\}/g, (whole, name: string) => server?.variables?.[name]?.default ?? whole);
}

/** The name of an API id of a restriction (`*` is every API); an id the catalog lacks is shown as is. */
export function apiName(catalog: Catalog, apiId: string): string {
  if (apiId === '*') return 'every API';
  return catalog.apis.find((api) => api.id.toLowerCase() === apiId.toLowerCase())?.name ?? apiId;
}

/** The name of a method id of an API (`*` is every method). */
export function methodName(catalog: Catalog, apiId: string, methodId: string): string {
  if (methodId === '*') return 'every method';
  const api = catalog.apis.find((candidate) => candidate.id.toLowerCase() === apiId.toLowerCase());
  return api?.methods.find((method) => method.id.toLowerCase() === methodId.toLowerCase())?.name ?? methodId;
}

/** The path parameters of a template that `values` leaves empty (or blank): a request without them is another path. */
export function missingParameters(template: string, values: Record<string, string>): string[] {
  return [...template.matchAll(/\{([^}]+)\}/g)]
    .map((match) => match[1]!)
    .filter((name) => (values[name] ?? '').trim() === '');
}

/**
 * The path of a test request: the template's parameters filled in (percent-encoded, so a value cannot
 * add segments) and the query string appended.
 */
export function fillPath(template: string, values: Record<string, string>, query = ''): string {
  const path = template.replace(/\{([^}]+)\}/g, (_whole, name: string) =>
    encodeURIComponent(values[name] ?? ''),
  );
  const search = query.trim().replace(/^\?/, '');
  return search ? `${path}?${search}` : path;
}

/** Header lines as typed ("Name: value", one per line) → an object; lines without a name are reported. */
/** RFC 9110 §5.1: a field name is a token. */
export const fieldNamePattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function parseHeaderLines(text: string): { headers: Record<string, string>; mistakes: string[] } {
  const headers: Record<string, string> = {};
  const mistakes: string[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    if (line.trim() === '') return;
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).trim() : '';
    if (!fieldNamePattern.test(name)) {
      mistakes.push(`line ${i + 1}: write a header as Name: value`);
      return;
    }
    headers[name] = line.slice(colon + 1).trim();
  });
  return { headers, mistakes };
}
