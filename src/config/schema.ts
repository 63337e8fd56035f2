import { isIP } from 'node:net';
import { z } from 'zod';
import { didYouMean, discriminatorOf, nearMiss, oneOf } from '../kit/key-suggestions.js';
import { gatewayOwnedFields } from '../kit/gateway-owned-fields.js';
import { normalizeSegment } from '../kit/normalize-path.js';
import { declaredQuotaSchema } from '../quota/declared-quotas.js';
import { knownTimeZone } from '../quota/usage-history.js';
import { alertThresholdsSchema } from '../quota/quota-schema.js';
import { onErrorPolicies } from '../limiter/limiter.js';
import { tracingSchema } from './tracing-schema.js';

/**
 * The declarative schema of `conf/default.js`: types, defaults, allowed values and cross-field rules in
 * one place. Nested objects are strict (a misspelt key fails the start); so is the top level, except for
 * the keys the auth plugin declares (the loader asks it).
 */

/** A message for an issue of this schema; undefined leaves the issue to the next error map. */
function msg(message: string) {
  return (issue: { code?: string; input?: unknown }) =>
    issue.code === 'unrecognized_keys' ? undefined : issue.input === undefined ? 'is required' : message;
}

const portIn = (message: string) =>
  z
    .int({ error: msg(message) })
    .min(0, { error: msg(message) })
    .max(65535, { error: msg(message) });

const portNumber = portIn('must be an integer from 0 to 65535');
const portOrFalse = 'must be an integer from 0 to 65535, or false (no plain-HTTP listener)';

const milliseconds = z
  .int({ error: msg('must be a whole number of milliseconds') })
  .positive({ error: msg('must be a positive number of milliseconds') });

const nonEmpty = z.string({ error: msg('must be a string') }).min(1, { error: msg('must not be empty') });

const uuid = z.guid({ error: msg('must be a UUID') });

const apiKey = z
  .string({ error: msg('must be a string') })
  .min(16, { error: msg('must be at least 16 characters (generate one with gateway init)') });

export const authTypes = ['none', 'basic', 'apikey', 'ldap', 'plugin', 'jwt'] as const;
export const verbs = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
/** What an API speaks upstream: HTTP/1.1, or gRPC over HTTP/2 (h2c for `http://`, ALPN h2 for `https://`). */
export const apiProtocols = ['http', 'grpc'] as const;

/** A scheme named by an API or a method, as `APIKeyAuthType` names the gateway's. */
const schemeName = z.enum(authTypes, { error: (issue) => unknownAuthType(issue.input) });
const operationAuthError = `must be one of ${authTypes.join(', ')}, or a list of them`;

/**
 * The scheme of an API or a method, instead of `APIKeyAuthType` (see docs/authentication.md,
 * "Authentication per API"): one scheme, or a list whose schemes each read their own credentials.
 */
const operationAuth = z
  .union([schemeName, z.array(schemeName).min(1, { error: 'must name at least one scheme' })], {
    error: (issue) => {
      if (issue.code !== 'invalid_union') return msg(operationAuthError)(issue);
      if (typeof issue.input === 'string') return unknownAuthType(issue.input);
      const unknown = Array.isArray(issue.input)
        ? issue.input.find((scheme) => !(authTypes as readonly unknown[]).includes(scheme))
        : undefined;
      return typeof unknown === 'string'
        ? `'${unknown}' ${unknownAuthType(unknown)}`
        : msg(operationAuthError)(issue);
    },
  })
  .optional();

const verb = z
  .string({ error: msg(`must be one of ${verbs.join(', ')}`) })
  .transform((value) => value.toUpperCase())
  .pipe(z.enum(verbs, { error: oneOf(`must be one of ${verbs.join(', ')}`, verbs) }));

const httpUrl = z.string({ error: msg('must be an http(s) URL') }).refine(
  (value) => {
    if (!URL.canParse(value)) return false;
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  },
  { error: msg('must be an http(s) URL') },
);

/** A URL without a user or password: fetch() refuses one that has them, and a log must not show them. */
const carriesNoCredentials = (value: string) =>
  !URL.canParse(value) || new URL(value).username + new URL(value).password === '';

const upstreamUrl = httpUrl
  .refine((value) => !value.includes('?') && !value.includes('#'), {
    error: 'must not carry a query or a fragment',
  })
  .refine(carriesNoCredentials, { error: 'must not carry credentials' });

const redisUrl = z
  .string({ error: msg('must be a redis:// or rediss:// URL') })
  .refine((value) => URL.canParse(value) && ['redis:', 'rediss:'].includes(new URL(value).protocol), {
    error: msg('must be a redis:// or rediss:// URL'),
  });

const staticSegment = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+$/;
const paramSegment = /^\{[A-Za-z_][A-Za-z0-9_]*\}$/;
const isDotSegment = (segment: string) => segment === '.' || segment === '..';

/** An absolute path whose segments (between slashes) all pass `segmentOk`; `/` alone is always fine. */
const absolutePath = (segmentOk: (segment: string) => boolean, error: string) =>
  z
    .string({ error: msg('must be a string') })
    .refine(
      (value) => value === '/' || (value.startsWith('/') && value.slice(1).split('/').every(segmentOk)),
      {
        error: msg(error),
      },
    );

/** A literal segment that a request can carry: no `;`, no trailing dot or space, no encoded `%`, … */
const isLiteral = (segment: string) =>
  staticSegment.test(segment) && !isDotSegment(segment) && normalizeSegment(segment) !== null;

const basePath = absolutePath(
  isLiteral,
  'must be an absolute path like /pets (no trailing slash, no dot segments, no parameters, no ;)',
);

const pathTemplate = absolutePath(
  (segment) => paramSegment.test(segment) || isLiteral(segment),
  'must be a path template like /{petId} or /findByStatus (no ;, no segment ending in a dot)',
);

const cidrOrAddress = z.string({ error: msg('must be an IP address or CIDR') }).refine(
  (value) => {
    const [address = '', prefix, ...rest] = value.split('/');
    const family = isIP(address);
    if (family === 0 || rest.length > 0) return false;
    if (prefix === undefined) return true;
    const bits = Number(prefix);
    return /^\d+$/.test(prefix) && bits <= (family === 4 ? 32 : 128);
  },
  { error: msg('must be an IP address or CIDR') },
);

/** The ways an API's requests are spread across its targets, each by the targets' weights. */
export const balancePolicies = ['round-robin', 'least-requests'] as const;

const upstreamTarget = z.union(
  [
    upstreamUrl,
    z.strictObject({
      url: upstreamUrl,
      /** Its share of the API's requests against the other targets' (default: 1). */
      weight: z
        .int({ error: msg('must be a whole number from 1 to 1000') })
        .min(1, { error: msg('must be a whole number from 1 to 1000') })
        .max(1000, { error: msg('must be a whole number from 1 to 1000') })
        .default(1),
    }),
  ],
  { error: msg('must be an http(s) URL or { url, weight }') },
);

const healthCheckSchema = z.strictObject({
  /**
   * What each target of an HTTP API is asked with a GET, from its origin's root (`/healthz`): required
   * there, refused for a gRPC API.
   */
  path: absolutePath(() => true, 'must be an absolute path like /healthz').optional(),
  /**
   * What each target of a gRPC API is asked by the gRPC health checking protocol
   * (`grpc.health.v1.Health/Check`): a service's name, or '' (the default) for the whole server.
   * Refused for an HTTP API.
   */
  service: z.string({ error: msg("must be a gRPC service's name (helloworld.Greeter), or ''") }).optional(),
  /** Milliseconds from one check of a target to the next. */
  interval: milliseconds,
  /** Milliseconds a check has for its answer's head, after which it failed. */
  timeout: milliseconds,
  /**
   * Failed checks in a row (not 2xx, or for gRPC not SERVING; a timeout, a refused connection) that take
   * a target out.
   */
  unhealthyAfter: z
    .int({ error: msg('must be a whole number of at least 1') })
    .min(1, { error: msg('must be a whole number of at least 1') })
    .default(2),
  /** Good checks in a row that bring a target that is out back. */
  healthyAfter: z
    .int({ error: msg('must be a whole number of at least 1') })
    .min(1, { error: msg('must be a whole number of at least 1') })
    .default(2),
});

const outlierDetectionSchema = z.strictObject({
  /**
   * Failures in a row of the exchanges sent to a target (a connection refused, reset or timed out, or a
   * 5xx answer) that eject it.
   */
  consecutiveFailures: z
    .int({ error: msg('must be a whole number of at least 1') })
    .min(1, { error: msg('must be a whole number of at least 1') })
    .default(5),
  /** Milliseconds an ejected target is sent no exchanges. */
  ejectTime: milliseconds.default(30_000),
});

/** A DNS name a TLS client may send by SNI (RFC 6066 §3 allows no IP address there). */
const serverName = z
  .string({ error: msg('must be a DNS name (api.internal)') })
  .refine((value) => isIP(value) === 0, { error: 'must be a DNS name, not an IP address (RFC 6066 §3)' })
  .regex(/^[a-z0-9_]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9])?)*$/i, {
    error: msg('must be a DNS name (api.internal)'),
  });

/**
 * How the gateway's TLS connections to the `https://` targets of an API are made (files relative to
 * the folder the gateway runs in, as `tls`'s; read at start and at each reload).
 */
const upstreamTlsSchema = z.strictObject({
  /**
   * The CAs (PEM) a target's certificate must chain to. Given, they replace the system's CAs for this
   * upstream, as Node's `ca`, Envoy's `trusted_ca` and Kong's `ca_certificates` do; without it, the
   * system's CAs are trusted.
   */
  ca: nonEmpty.optional(),
  /** The client certificate (PEM) sent to a target that asks for one (mTLS); with `key`. */
  cert: nonEmpty.optional(),
  /** The private key (PEM) of `cert`. */
  key: nonEmpty.optional(),
  /**
   * The name sent by SNI and checked in the target's certificate, instead of the target URL's host
   * (the `Host` sent stays the target's).
   */
  servername: serverName.optional(),
});

const upstreamPool = z.strictObject({
  /** The instances of the API, each with the same path (`http://10.0.0.1:9000/v2`). */
  targets: z
    .array(upstreamTarget, { error: msg('must be an array of targets') })
    .min(1, { error: msg('must name at least one target') }),
  /**
   * `round-robin` (the default, as Kong's and Envoy's): each target in turn, as often as its weight
   * says; `least-requests`: the target with the fewest requests in flight for its weight.
   */
  balance: z
    .enum(balancePolicies, { error: oneOf("must be 'round-robin' or 'least-requests'", balancePolicies) })
    .default('round-robin'),
  /** Active health checks from every gateway (none without it). */
  healthCheck: healthCheckSchema.optional(),
  /** Passive outlier detection from the exchanges of every gateway (none without it). */
  outlierDetection: outlierDetectionSchema.optional(),
  /**
   * Other targets an exchange may be sent to when its connection failed before anything of it went out,
   * or the target refused a gRPC call's stream (not processed), or, for an idempotent request without a
   * body, its connection was cut before any answer came, or it was answered 502, 503 or 504: 0 for none.
   */
  retries: z
    .int({ error: msg('must be a whole number from 0 to 10') })
    .min(0, { error: msg('must be a whole number from 0 to 10') })
    .max(10, { error: msg('must be a whole number from 0 to 10') })
    .default(2),
  /**
   * Milliseconds from one resolution of a target's host name to the next: each address it resolves to is
   * a target of the name's weight (an IP literal is not resolved).
   */
  dnsRefresh: z
    .int({ error: msg('must be a whole number of milliseconds, at least 1000') })
    .min(1_000, { error: msg('must be a whole number of milliseconds, at least 1000') })
    .default(30_000),
  /** The TLS of the connections to its `https://` targets: a private CA, a client certificate, SNI. */
  tls: upstreamTlsSchema.optional(),
});

/** An API's upstream: one URL, or a pool of targets (see docs/routing-and-proxy.md, "Upstreams"). */
const upstreamSchema = z.union([upstreamUrl, upstreamPool], {
  error: msg('must be an http(s) URL or an object of targets ({ targets: [...] })'),
});

const methodSchema = z.strictObject({
  id: uuid,
  name: nonEmpty,
  description: z.string().optional(),
  verb,
  path: pathTemplate,
  /**
   * The operation is a WebSocket endpoint (a GET of an API that takes upgrades): the catalog's OpenAPI
   * document says so, and the console shows how to connect instead of a "try it" form. Routing and
   * counting are the same either way.
   */
  websocket: z.boolean({ error: msg('must be true or false') }).optional(),
  /** The method's scheme, instead of its API's (`auth`) or the gateway's (`APIKeyAuthType`). */
  auth: operationAuth,
});

const apiSchema = z.strictObject({
  id: uuid,
  name: nonEmpty,
  description: z.string().optional(),
  basePath,
  upstream: upstreamSchema,
  methods: z.array(methodSchema, { error: msg('must be an array') }).default([]),
  /** Literal path segments match only in the catalog's case (default: in any case). */
  caseSensitive: z.boolean({ error: msg('must be true or false') }).default(false),
  /** Forward paths and verbs that no method declares (default: 404 or 405 from the gateway). */
  passUndeclared: z.boolean({ error: msg('must be true or false') }).default(false),
  /**
   * `grpc`: the upstream speaks gRPC over HTTP/2, each method a POST of `/<package.Service>/<Method>`
   * (basePath the service, path the method), and the gateway's own answers to gRPC calls are gRPC
   * statuses (see docs/routing-and-proxy.md, "gRPC").
   */
  protocol: z.enum(apiProtocols, { error: oneOf("must be 'http' or 'grpc'", apiProtocols) }).default('http'),
  /** Its GET operations accept a WebSocket upgrade (RFC 6455), proxied to the upstream (default: true). */
  websocket: z.boolean({ error: msg('must be true or false') }).default(true),
  /** The API's scheme, instead of `APIKeyAuthType`: `'none'` makes it public. */
  auth: operationAuth,
});

const applicationSchema = z.strictObject({
  id: uuid,
  name: nonEmpty,
  description: z.string().optional(),
  apikey_development: apiKey.optional(),
  apikey_production: apiKey.optional(),
  /** Puts the application on this plan (see docs/quotas.md, "Plans"), written into the store as quotas are. */
  plan: uuid.optional(),
});

const adminUserSchema = z.strictObject({
  username: nonEmpty,
  password: nonEmpty,
  role: z.enum(['admin', 'member'], { error: oneOf('must be admin or member', ['admin', 'member']) }),
});

const allowedHostsMessage =
  'must be an array of host names without ports (a leading dot allows the subdomains)';
const allowedHostName = z
  .string({ error: msg(allowedHostsMessage) })
  .regex(/^\.?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$/i, {
    error: msg(allowedHostsMessage),
  });

const tlsSchema = z.strictObject({
  host: nonEmpty.optional(),
  port: portNumber.default(8443),
  key: nonEmpty,
  cert: nonEmpty,
  ca: nonEmpty.optional(),
});

/** The admin listener's TLS: its address and port are `admin.host` and `admin.port`. */
const adminTlsSchema = tlsSchema.pick({ key: true, cert: true, ca: true });

const adminSchema = z
  .strictObject({
    host: nonEmpty.default('127.0.0.1'),
    port: portNumber.default(8081),
    users: z.array(adminUserSchema, { error: msg('must be an array') }).default([]),
    /** Host names the admin listener answers besides its own, localhost and IP literals (DNS rebinding). */
    allowedHosts: z.array(allowedHostName, { error: msg(allowedHostsMessage) }).default([]),
    /** Serve the admin listener over HTTPS: its session cookie is then `Secure`. */
    tls: adminTlsSchema.optional(),
  })
  .default({ host: '127.0.0.1', port: 8081, users: [], allowedHosts: [] });

const maxCounterMemoryMb = z
  .number({ error: msg('must be a number of MiB from 1 to 1048576') })
  .min(1, { error: msg('must be a number of MiB from 1 to 1048576') })
  .max(1_048_576, { error: msg('must be a number of MiB from 1 to 1048576') })
  /** MiB this gateway's own counters may take (the memory store, or onError: local's fallback). */
  .default(128);
const quotasFile = nonEmpty.default('data/quotas.json');

/** `store.type: "memory"` (the default): this process's counters, definitions in files. */
const memoryStoreSchema = z.strictObject({
  type: z.literal('memory').default('memory'),
  file: quotasFile,
  /** The applications made through the portal API; by default beside `file`. */
  applicationsFile: nonEmpty.optional(),
  maxCounterMemoryMb,
});

/** Milliseconds a decision of the shared counters may take before they count as unreachable. */
export const defaultCommandTimeoutMs = 50;

/** `store.type: "redis"`: counters and definitions shared by the fleet. */
const redisStoreSchema = z
  .strictObject({
    type: z.literal('redis'),
    url: redisUrl.optional(),
    cluster: z
      .array(redisUrl, { error: msg('must be an array of redis:// URLs') })
      .min(1)
      .optional(),
    prefix: nonEmpty.default('quotagate:'),
    /**
     * The redis store's local copy of the last quota definitions this gateway saw (relative to the project
     * folder): enforced when it starts while Redis is down, put back into a Redis that lost them.
     */
    snapshotFile: nonEmpty.default('data/quota-snapshot.json'),
    onError: z
      .enum(onErrorPolicies, { error: oneOf('must be local, allow or deny', onErrorPolicies) })
      .default('local'),
    /** Milliseconds a counter decision may take in Redis before the gateway treats Redis as unreachable. */
    commandTimeout: milliseconds
      .max(10_000, { error: msg('must be at most 10000 milliseconds') })
      .default(defaultCommandTimeoutMs),
    maxCounterMemoryMb,
    /** A memory store's file, read once at start to say how to move its quotas here. */
    file: quotasFile,
  })
  .superRefine((store, context) => {
    if (!store.url && !store.cluster)
      context.addIssue({
        code: 'custom',
        path: ['url'],
        message: "required when store.type is 'redis' (or set store.cluster)",
      });
  });

/** The keys of the Redis store only: in a memory store they are a mistake that says so. */
export const redisOnlyStoreKeys: ReadonlySet<string> = new Set(
  Object.keys(redisStoreSchema.shape).filter((key) => !(key in memoryStoreSchema.shape)),
);

const storeSchema = z
  .discriminatedUnion('type', [memoryStoreSchema, redisStoreSchema], {
    error: (issue) =>
      issue.code === 'invalid_union'
        ? `must be memory or redis${didYouMean(discriminatorOf(issue), ['memory', 'redis'])}`
        : undefined,
  })
  .default({ type: 'memory', file: 'data/quotas.json', maxCounterMemoryMb: 128 });

// RFC 4512 section 2.5: a name or a numeric OID, then options such as ;lang-en.
const ldapAttributeName = /^(?:[A-Za-z][A-Za-z0-9-]*|\d+(?:\.\d+)+)(?:;[A-Za-z0-9-]+)*$/;
const passwordAttributes = new Set(['userpassword', 'authpassword', 'unicodepwd', '2.5.4.35']);

const ldapSchema = z
  .strictObject({
    url: z
      .string({ error: msg('must be an ldap:// or ldaps:// URL') })
      .refine((value) => URL.canParse(value) && ['ldap:', 'ldaps:'].includes(new URL(value).protocol), {
        error: msg('must be an ldap:// or ldaps:// URL'),
      }),
    adminDn: nonEmpty,
    adminPassword: z.string({ error: msg('must be a string') }).optional(),
    searchBase: nonEmpty,
    searchFilter: nonEmpty.refine((value) => value.includes('{{username}}'), {
      error: 'must contain the placeholder {{username}}',
    }),
    groupSearchBase: nonEmpty.optional(),
    groupSearchFilter: nonEmpty.optional(),
    startTLS: z.boolean({ error: msg('must be true or false') }).default(false),
    cache: z.boolean({ error: msg('must be true or false') }).default(false),
    tlsOptions: z.record(z.string(), z.unknown(), { error: msg('must be an object') }).optional(),
    timeout: milliseconds.default(5_000),
    /** The attribute whose one value names the principal; without it, the entry's DN does. */
    identityAttribute: z
      .string({ error: msg("must be an attribute name such as uid; leave it out to use the entry's DN") })
      .refine((value) => ldapAttributeName.test(value) && value.toLowerCase() !== 'dn', {
        error: msg("must be an attribute name such as uid; leave it out to use the entry's DN"),
      })
      .refine((value) => !passwordAttributes.has(value.split(';')[0]!.toLowerCase()), {
        error: 'must not be a password attribute (the identity is written to logs)',
      })
      .optional(),
  })
  .superRefine((ldap, context) => {
    // A group filter on the typed name would give each spelling of one user its own groups.
    if (ldap.groupSearchFilter?.includes('{{username}}') && !ldap.identityAttribute)
      context.addIssue({
        code: 'custom',
        path: ['groupSearchFilter'],
        message:
          '{{username}} needs ldap.identityAttribute (the name as the directory spells it), or use {{dn}}',
      });
  });

/** RFC 7518 section 3.1 signature algorithms a JWKS key may sign with (public-key: the IdP keeps the secret). */
export const asymmetricAlgorithms = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;
/** The HMAC algorithms, checked with `jwt.secret` only (never with a JWKS key: no algorithm confusion). */
export const hmacAlgorithms = ['HS256', 'HS384', 'HS512'] as const;
const jwtAlgorithms = [...asymmetricAlgorithms, ...hmacAlgorithms] as const;
/** RFC 7518 section 3.2: an HMAC key has at least as many bytes as the hash's output. */
export const hmacKeyBytes: Readonly<Record<string, number>> = { HS256: 32, HS384: 48, HS512: 64 };
/** The bytes of a secret in UTF-8, as an HMAC key takes it. */
export const bytesOf = (text: string) => new TextEncoder().encode(text).length;

/**
 * The HMAC algorithms a secret is long enough for (RFC 7518 section 3.2): what `jwt.secret` allows when
 * `jwt.algorithms` does not say.
 */
export function hmacAlgorithmsFor(secret: string): Array<(typeof hmacAlgorithms)[number]> {
  return hmacAlgorithms.filter((algorithm) => bytesOf(secret) >= hmacKeyBytes[algorithm]!);
}

const algorithmError = oneOf(`must be one of ${jwtAlgorithms.join(', ')}`, jwtAlgorithms);

// RFC 9110 section 5.1: a field name is a token.
const fieldName = z
  .string({ error: msg('must be a header name') })
  .regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, { error: msg('must be a header name') });

const jwtSchema = z.strictObject({
  /** The identity provider's JWK Set, fetched at start and again for a key it does not know yet. */
  jwksUri: httpUrl
    .refine(carriesNoCredentials, {
      error: 'must not carry credentials: a fetch refuses a user and password in the URL',
    })
    .optional(),
  issuer: nonEmpty,
  audience: z.union([nonEmpty, z.array(nonEmpty).min(1)], {
    error: msg('must be a string or a non-empty array of strings'),
  }),
  /** The claim whose value is the caller's application, the id its quotas are made for. */
  applicationClaim: nonEmpty.default('client_id'),
  algorithms: z
    .array(
      z.enum(jwtAlgorithms, {
        // RFC 8725 section 3.1: an unsigned token proves nothing, whoever sent it.
        error: (issue) =>
          typeof issue.input === 'string' && issue.input.toLowerCase() === 'none'
            ? 'must not be none: an unsigned token proves nothing (RFC 8725 section 3.1)'
            : algorithmError(issue),
      }),
      { error: msg('must be an array of algorithm names') },
    )
    .min(1, { error: msg('must name at least one algorithm') })
    .optional(),
  /** Seconds of clock difference with the identity provider allowed on exp and nbf. */
  clockTolerance: z
    .int({ error: msg('must be a whole number of seconds') })
    .min(0, { error: msg('must be a whole number of seconds') })
    .max(600, { error: msg('must be at most 600 (ten minutes)') })
    .default(30),
  /**
   * The shared key of HS256/384/512 tokens: at least 32 bytes, and as many as the hash's output for
   * each HMAC algorithm it serves (48 for HS384, 64 for HS512; RFC 7518 section 3.2).
   */
  secret: z
    .string({ error: msg('must be a string of at least 32 bytes') })
    .refine((secret) => bytesOf(secret) >= hmacKeyBytes.HS256!, {
      error: 'must be at least 32 bytes (RFC 7518 section 3.2: as long as the HS256 hash)',
    })
    .optional(),
  /**
   * Milliseconds after a JWKS fetch (good or failed) before a token with an unknown kid may fetch the
   * set again: tokens with made-up kids fetch it at most once per this.
   */
  jwksCooldown: milliseconds.default(30_000),
  /** Milliseconds a JWKS fetch may take, body included; a token with no key known yet waits this long at most. */
  jwksTimeout: milliseconds.default(5_000),
  /** Claims sent upstream as request fields, claim name to field name (`{ sub: 'X-User' }`). */
  forwardClaims: z
    .record(
      nonEmpty,
      fieldName.refine((name) => !gatewayOwnedFields.has(name.toLowerCase()), {
        error: (issue) =>
          `must not be ${String(issue.input)}: the gateway sets, drops or frames by that field itself`,
      }),
      { error: msg('must be an object of claim names to header names') },
    )
    .optional(),
});

const serverSchema = z
  .strictObject({
    headersTimeout: milliseconds.default(10_000),
    requestTimeout: milliseconds.default(60_000),
    keepAliveTimeout: milliseconds.default(5_000),
    connectionsCheckingInterval: milliseconds.default(1_000),
    maxHeaderSize: z
      .int({ error: msg('must be a whole number of bytes') })
      .min(1024, { error: msg('must be at least 1024 bytes') })
      .default(16_384),
    /**
     * Milliseconds between two pings the gateway sends each WebSocket client; a client that has sent
     * nothing back by the next is gone, and its connection ends with 1001.
     */
    webSocketPingInterval: milliseconds.default(30_000),
    /** The largest WebSocket frame payload relayed, in bytes, either way; a larger frame is closed with 1009. */
    webSocketMaxFrame: z
      .int({ error: msg('must be a whole number of bytes') })
      .min(1024, { error: msg('must be at least 1024 bytes') })
      .max(Number.MAX_SAFE_INTEGER, { error: msg('must be at most 2^53 - 1 bytes') })
      .default(16 * 1_048_576),
  })
  .default({
    headersTimeout: 10_000,
    requestTimeout: 60_000,
    keepAliveTimeout: 5_000,
    connectionsCheckingInterval: 1_000,
    maxHeaderSize: 16_384,
    webSocketPingInterval: 30_000,
    webSocketMaxFrame: 16 * 1_048_576,
  });

const accessLogSchema = z
  .strictObject({
    /** Where the access lines go (relative to the project folder); by default, with the rest of the log. */
    file: nonEmpty.optional(),
    /** Writes one of every N access lines of requests refused with 429 (each says `sampled: N`). */
    sample429: z
      .int({ error: msg('must be a whole number of at least 1') })
      .min(1, { error: msg('must be a whole number of at least 1') })
      .default(1),
    /**
     * Milliseconds an access line may wait to be written with the lines after it (at most 64 KiB go in
     * one write); 0 writes every line at once.
     */
    flushMs: z
      .int({ error: msg('must be a whole number of milliseconds') })
      .min(0, { error: msg('must be a whole number of milliseconds') })
      .max(60_000, { error: msg('must be at most 60000 (a minute)') })
      .default(1_000),
  })
  .default({ sample429: 1, flushMs: 1_000 });

/** The shortest webhook secret: 16 characters, 128 bits when they are random hex or more. */
export const shortestWebhookSecret = 16;

/** A receiver of threshold alerts (docs/quotas.md, "Alerts"). */
const webhookSchema = z.strictObject(
  {
    /** Where the CloudEvents are POSTed; the signature, not a password in the URL, proves who sent them. */
    url: httpUrl.refine(carriesNoCredentials, { error: 'must not carry credentials' }),
    /** Key of the HMAC-SHA256 of each body, sent as `X-Quotagate-Signature: sha256=<hex>`; kept out of the log. */
    secret: z
      .string({ error: msg(`must be a string of at least ${shortestWebhookSecret} characters`) })
      .min(shortestWebhookSecret, {
        error: `must be a string of at least ${shortestWebhookSecret} characters`,
      }),
    /** Percentages of a restriction's limit whose crossing in a window is sent here (a quota's own replace them). */
    thresholds: alertThresholdsSchema.default([80, 100]),
  },
  { error: msg('must be an object { url, secret, thresholds }') },
);

const notificationsSchema = z
  .strictObject({
    webhooks: z
      .array(webhookSchema, { error: msg('must be an array') })
      .max(20, {
        error: 'must hold at most 20 webhooks',
      })
      .default([]),
  })
  .default({ webhooks: [] });

const workerCountError = msg('must be a whole number from 1 to 1024, or "auto" (one per CPU)');

/**
 * Worker processes of `gateway start` behind the data-plane ports (node:cluster); 1 runs the gateway in
 * one process, without a cluster.
 */
const workers = z
  .union(
    [
      z.literal('auto'),
      z
        .int({ error: workerCountError })
        .min(1, { error: workerCountError })
        .max(1024, { error: workerCountError }),
    ],
    { error: workerCountError },
  )
  .default(1);

/** A section a scheme cannot do without: its absence says which scheme needs it. */
const requiredFor = <T extends z.ZodType>(schema: T, scheme: string, why = '') =>
  schema.meta({ description: `Required when APIKeyAuthType is '${scheme}'${why}` }) as T;
const missingFor =
  (scheme: string, why = '') =>
  (issue: { input?: unknown }) =>
    issue.input === undefined ? `required when APIKeyAuthType is '${scheme}'${why}` : undefined;

/**
 * The settings of each `APIKeyAuthType`, told apart by it: the section a scheme needs is required in its
 * variant (ldap's `ldap`, plugin's `APIKeyAuthPlugin`, apikey's `tls`) and optional in the others, so
 * that one config can keep the settings of a scheme it is not using now.
 */
const schemeSettings = {
  tls: tlsSchema.optional(),
  APIKeyAuthPlugin: nonEmpty.optional(),
  ldap: ldapSchema.optional(),
  jwt: jwtSchema.optional(),
};
/** What is wrong with an `APIKeyAuthType` that names no scheme, with the one it most likely misspells. */
export const unknownAuthType = (given: unknown): string =>
  `must be one of ${authTypes.join(', ')}${didYouMean(given, authTypes)}`;

/**
 * The scheme a misspelt `APIKeyAuthType` most likely means (`JWT` → `jwt`, `basik` → `basic`), or
 * undefined for a scheme spelt right or one too far from any.
 */
export function schemeMeant(given: unknown): AuthType | undefined {
  if (typeof given !== 'string' || (authTypes as readonly string[]).includes(given)) return undefined;
  return nearMiss(given, authTypes) as AuthType | undefined;
}

const authTypeError = {
  error: (issue: { code?: string; input?: unknown; discriminator?: string }) =>
    issue.input === undefined ? 'is required' : unknownAuthType(discriminatorOf(issue)),
};
const schemeSchema = z.discriminatedUnion(
  'APIKeyAuthType',
  [
    z.object({ ...schemeSettings, APIKeyAuthType: z.literal('basic').default('basic') }),
    z.object({ ...schemeSettings, APIKeyAuthType: z.literal('none') }),
    z.object({
      ...schemeSettings,
      APIKeyAuthType: z.literal('apikey'),
      tls: requiredFor(
        tlsSchema.clone({ ...tlsSchema.def, error: missingFor('apikey', ' (keys travel over HTTPS only)') }),
        'apikey',
        ' (keys travel over HTTPS only)',
      ),
    }),
    z.object({
      ...schemeSettings,
      APIKeyAuthType: z.literal('ldap'),
      ldap: requiredFor(ldapSchema.clone({ ...ldapSchema.def, error: missingFor('ldap') }), 'ldap'),
    }),
    z.object({
      ...schemeSettings,
      APIKeyAuthType: z.literal('jwt'),
      jwt: requiredFor(jwtSchema.clone({ ...jwtSchema.def, error: missingFor('jwt') }), 'jwt'),
    }),
    z.object({
      ...schemeSettings,
      APIKeyAuthType: z.literal('plugin'),
      APIKeyAuthPlugin: requiredFor(
        z.string({ error: missingFor('plugin') }).min(1, { error: 'must not be empty' }),
        'plugin',
      ),
    }),
  ],
  { error: (issue) => (issue.code === 'invalid_union' ? authTypeError.error(issue) : undefined) },
);

/**
 * What each application called, per API, method and day, kept in the store (docs/quotas.md, "Usage
 * history"). Read at start: a change takes a restart.
 */
const usageHistorySchema = z
  .strictObject({
    enabled: z.boolean({ error: msg('must be true or false') }).default(true),
    /** The IANA time zone whose calendar days the history counts by. */
    timeZone: z
      .string({ error: msg('must be an IANA time zone like UTC or Europe/Paris') })
      .refine(knownTimeZone, { error: msg('must be an IANA time zone like UTC or Europe/Paris') })
      .default('UTC'),
    /** Days of history kept, up to today. */
    days: z
      .int({ error: msg('must be a whole number of days from 1 to 3660') })
      .min(1, { error: msg('must be a whole number of days from 1 to 3660') })
      .max(3660, { error: msg('must be a whole number of days from 1 to 3660') })
      .default(400),
  })
  .default({ enabled: true, timeZone: 'UTC', days: 400 });

/** Everything else, the same for every scheme. */
const commonSchema = z.object({
  host: nonEmpty.optional(),
  /** The data plane's plain-HTTP port, or false for none (HTTPS only, on `tls.port`). */
  port: z.union([z.literal(false), portIn(portOrFalse)], { error: msg(portOrFalse) }).default(8080),
  workers,
  /**
   * HTTP/2 on the data plane: h2 by ALPN on the TLS listener, and HTTP/2 with prior knowledge (h2c)
   * beside HTTP/1.1 on the cleartext port; false serves HTTP/1.1 only.
   */
  http2: z.boolean({ error: msg('must be true or false') }).default(true),
  apikey_development: apiKey.optional(),
  apikey_production: apiKey.optional(),
  admin: adminSchema,
  store: storeSchema,
  apis: z.array(apiSchema, { error: msg('must be an array') }).default([]),
  applications: z.array(applicationSchema, { error: msg('must be an array') }).default([]),
  proxyTimeout: milliseconds.default(30_000),
  /**
   * Answers read to their end after their clients left, for what a `throttleunits` restriction charges
   * (docs/quotas.md), at once in this gateway: past it the oldest is cut, and charged what its body said
   * so far or its `default`.
   */
  upstreamDrainLimit: z
    .int({ error: msg('must be a whole number of at least 1') })
    .min(1, { error: msg('must be a whole number of at least 1') })
    .default(256),
  pluginTimeout: milliseconds.default(5_000),
  shutdownTimeout: milliseconds.default(10_000),
  trustProxy: z.array(cidrOrAddress, { error: msg('must be an array of IP addresses or CIDRs') }).default([]),
  forwardCredentials: z.boolean({ error: msg('must be true or false') }).default(false),
  /**
   * Where a caller reads its own quotas on the data plane (see docs/quotas.md, "A caller's own usage"), or
   * false for nowhere; it must not be a path of the catalog.
   */
  usagePath: z
    .union(
      [
        z.literal(false),
        absolutePath(isLiteral, 'must be an absolute path like /_quotagate/usage, or false'),
      ],
      {
        error: msg('must be an absolute path like /_quotagate/usage, or false'),
      },
    )
    .default('/_quotagate/usage'),
  accessLog: accessLogSchema,
  /** Threshold alerts: the webhooks told when an application's count crosses a percentage of a limit. */
  notifications: notificationsSchema,
  /**
   * Quotas kept in git: written into the store at start and at each reload, read-only through the admin
   * API (see docs/admin-api.md, "Declared quotas, and moving quotas").
   */
  quotas: z.array(declaredQuotaSchema(), { error: msg('must be an array of quotas') }).default([]),
  usageHistory: usageHistorySchema,
  server: serverSchema,
  /** Traces over OTLP (docs/tracing.md); off by default. */
  tracing: tracingSchema,
});

export const configSchema = z.intersection(commonSchema, schemeSchema);

export const knownTopLevelKeys: ReadonlySet<string> = new Set([
  ...Object.keys(commonSchema.shape),
  ...Object.keys(schemeSettings),
  'APIKeyAuthType',
]);

export type Config = z.output<typeof configSchema>;
export type ApiConfig = Config['apis'][number];
export type MethodConfig = ApiConfig['methods'][number];
export type UpstreamPoolConfig = Exclude<ApiConfig['upstream'], string>;
export type HealthCheckConfig = NonNullable<UpstreamPoolConfig['healthCheck']>;
export type BalancePolicy = UpstreamPoolConfig['balance'];
export type OutlierDetectionConfig = NonNullable<UpstreamPoolConfig['outlierDetection']>;
export type UpstreamTlsConfig = NonNullable<UpstreamPoolConfig['tls']>;

/** An upstream's targets, each with its URL and weight: one of weight 1 for the URL form. */
export function upstreamTargets(upstream: ApiConfig['upstream']): Array<{ url: string; weight: number }> {
  if (typeof upstream === 'string') return [{ url: upstream, weight: 1 }];
  return upstream.targets.map((target) => (typeof target === 'string' ? { url: target, weight: 1 } : target));
}
export type ApplicationConfig = Config['applications'][number];
export type AuthType = Config['APIKeyAuthType'];
/** The scheme of an operation: one, or a list (`apis[].auth`, `apis[].methods[].auth`). */
export type OperationAuth = AuthType | readonly AuthType[];
export type StoreConfig = Config['store'];
export type RedisStoreConfig = Extract<StoreConfig, { type: 'redis' }>;
export type MemoryStoreConfig = Extract<StoreConfig, { type: 'memory' }>;
export type UsageHistoryConfig = Config['usageHistory'];
