import { normalizeSegment } from '../kit/normalize-path.js';
import { applicationIdOf } from '../applications/application-ids.js';
import type { Environment } from '../applications/application-schema.js';
import { catalogIds, referenceProblem } from '../quota/catalog-references.js';
import { declaredListProblems, declaredPlanProblem, isMembership } from '../quota/declared-quotas.js';
import { isPasswordHash } from '../kit/password-hash.js';
import {
  asymmetricAlgorithms,
  bytesOf,
  hmacKeyBytes,
  upstreamTargets,
  type AuthType,
  type Config,
  type OperationAuth,
} from './schema.js';

export type KeyPath = ReadonlyArray<string | number>;

/** One mistake in the config: where it is and what is wrong. */
export interface Problem {
  path: KeyPath;
  message: string;
}

/** Formats a key path the way people write it: `apis[1].methods[0].verb`. */
export function formatKeyPath(path: KeyPath): string {
  return path.reduce<string>(
    (text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${key}` : key),
    '',
  );
}

/** The value the config files gave at a key path, before the schema read it (undefined if none). */
export type GivenValue = (path: KeyPath) => unknown;

/**
 * Rules that span several keys. They run in the same pass as the schema, so that one start names every
 * mistake: on a config whose other keys may still be wrong, a rule that meets a value of the wrong type
 * (which the schema names) is left out rather than guessed at.
 */
export function crossFieldProblems(
  config: Config,
  environment: Environment,
  given: GivenValue = () => undefined,
): Problem[] {
  const rules = [
    catalogProblems,
    keyProblems,
    schemeProblems,
    operationAuthProblems,
    jwtProblems,
    listenerProblems,
    quotaProblems,
  ];
  return rules.flatMap((rule) => {
    try {
      return rule(config, environment, given);
    } catch (error) {
      if (error instanceof TypeError) return [];
      throw error;
    }
  });
}

function firstSeen<T>(items: Iterable<[T, KeyPath]>): Problem[] {
  const seen = new Map<T, KeyPath>();
  const problems: Problem[] = [];
  for (const [value, path] of items) {
    const earlier = seen.get(value);
    if (earlier) problems.push({ path, message: `duplicate of ${formatKeyPath(earlier)}` });
    else seen.set(value, path);
  }
  return problems;
}

function catalogProblems(config: Config): Problem[] {
  const apiIds = config.apis.map((api, i): [string, KeyPath] => [api.id.toLowerCase(), ['apis', i, 'id']]);
  // Compared regardless of case: `/pets` and `/Pets` would compete for the same requests.
  const basePaths = config.apis.map((api, i): [string, KeyPath] => [
    api.basePath.toLowerCase(),
    ['apis', i, 'basePath'],
  ]);
  const methodIds = config.apis.flatMap((api, i) =>
    api.methods.map((method, j): [string, KeyPath] => [
      method.id.toLowerCase(),
      ['apis', i, 'methods', j, 'id'],
    ]),
  );
  // `/{a}` and `/{b}` route the same requests, and so do `/~a` and `/%7Ea`: templates are compared with
  // their parameters blanked and their literals normalized, without case unless the API keeps case.
  const routes = config.apis.flatMap((api, i) =>
    api.methods.map((method, j): [string, KeyPath] => {
      const template = method.path
        .split('/')
        .map((segment) => (segment.startsWith('{') ? '{}' : (normalizeSegment(segment) ?? segment)))
        .join('/');
      return [
        `${i} ${method.verb} ${api.caseSensitive ? template : template.toLowerCase()}`,
        ['apis', i, 'methods', j, 'path'],
      ];
    }),
  );
  return [
    ...firstSeen(apiIds),
    ...firstSeen(basePaths),
    ...firstSeen(methodIds),
    ...firstSeen(routes),
    ...grpcVerbProblems(config),
    ...grpcUpstreamProblems(config),
    ...healthCheckProblems(config),
    ...targetPathProblems(config),
    ...webSocketMethodProblems(config),
    ...upstreamTlsProblems(config),
  ];
}

/**
 * An upstream's `tls` holds a client certificate with its key, or neither; and it applies to
 * `https://` targets only, so an upstream without one would be sent plain HTTP whatever it says.
 */
function upstreamTlsProblems(config: Config): Problem[] {
  return config.apis.flatMap((api, i): Problem[] => {
    if (typeof api.upstream === 'string' || api.upstream.tls === undefined) return [];
    const { tls } = api.upstream;
    const path = ['apis', i, 'upstream', 'tls'];
    if (!upstreamTargets(api.upstream).some(({ url }) => url.toLowerCase().startsWith('https:')))
      return [{ path, message: 'applies to https:// targets only, and this upstream has none' }];
    if ((tls.cert === undefined) === (tls.key === undefined)) return [];
    return tls.cert === undefined
      ? [{ path: [...path, 'cert'], message: 'is required with tls.key: a client certificate needs both' }]
      : [
          {
            path: [...path, 'key'],
            message: 'is required with tls.cert: a client certificate needs its key',
          },
        ];
  });
}

/**
 * A gRPC call's path is `/<package.Service>/<Method>` from the server's root (gRPC over HTTP/2,
 * "Path"), and the API's basePath is the service: a path in its upstream URL, as a REST API's names its
 * base path, would go before it and find no method (12 UNIMPLEMENTED). The URL names the server only.
 * Every target of a pool has the path of the first (targetPathProblems): the first is the one told.
 */
function grpcUpstreamProblems(config: Config): Problem[] {
  return config.apis.flatMap((api, i) => {
    if (api.protocol !== 'grpc') return [];
    const [target] = upstreamTargets(api.upstream);
    if (target === undefined || !URL.canParse(target.url)) return [];
    const { pathname } = new URL(target.url);
    if (pathname === '' || pathname === '/') return [];
    return [
      {
        path:
          typeof api.upstream === 'string' ? ['apis', i, 'upstream'] : ['apis', i, 'upstream', 'targets', 0],
        message: `must have no path in an API of protocol 'grpc': a gRPC call's path is /<package.Service>/<Method> from the server's root (remove ${pathname})`,
      },
    ];
  });
}

/**
 * A health check asks an HTTP API's targets for `path` with a GET, and a gRPC API's for `service` by the
 * gRPC health checking protocol (a gRPC server is HTTP/2 only, and answers no GET): each form takes its
 * own key and refuses the other's.
 */
function healthCheckProblems(config: Config): Problem[] {
  return config.apis.flatMap((api, i) => {
    if (typeof api.upstream === 'string' || api.upstream.healthCheck === undefined) return [];
    const { path, service } = api.upstream.healthCheck;
    const at = ['apis', i, 'upstream', 'healthCheck'];
    if (api.protocol === 'grpc')
      return path === undefined
        ? []
        : [
            {
              path: [...at, 'path'],
              message:
                "is not available in an API of protocol 'grpc': its targets are checked by the gRPC health checking protocol (use service: the name of a service, or '' for the whole server)",
            },
          ];
    if (service !== undefined)
      return [
        {
          path: [...at, 'service'],
          message:
            "is only for an API of protocol 'grpc': an HTTP API's targets are checked with a GET of path",
        },
      ];
    return path === undefined
      ? [
          {
            path: [...at, 'path'],
            message: 'is required (the path of its GETs, /healthz)',
          },
        ]
      : [];
  });
}

/**
 * The targets of a pool are instances of one API: a request goes to whichever is picked with the same
 * path, so a target with another path would answer a different resource.
 */
function targetPathProblems(config: Config): Problem[] {
  return config.apis.flatMap((api, i) => {
    if (typeof api.upstream === 'string') return [];
    const paths = upstreamTargets(api.upstream).map(({ url }) =>
      URL.canParse(url) ? new URL(url).pathname.replace(/\/+$/, '') : null,
    );
    const first = paths[0] ?? null;
    return paths.flatMap((path, j) =>
      j === 0 || path === null || first === null || path === first
        ? []
        : [
            {
              path: ['apis', i, 'upstream', 'targets', j],
              message: `must have the path of targets[0] (${first || '/'}), not ${path || '/'}: every target of an API is sent the same path`,
            },
          ],
    );
  });
}

/** Every gRPC call is a POST (gRPC over HTTP/2, "Requests"): a method of another verb would never match. */
function grpcVerbProblems(config: Config): Problem[] {
  return config.apis.flatMap((api, i) =>
    api.protocol !== 'grpc'
      ? []
      : api.methods.flatMap((method, j) =>
          method.verb === 'POST'
            ? []
            : [
                {
                  path: ['apis', i, 'methods', j, 'verb'],
                  message: "must be POST in an API of protocol 'grpc' (every gRPC call is a POST)",
                },
              ],
        ),
  );
}

/**
 * A WebSocket endpoint opens with a GET (RFC 6455 §4.1), of an API that takes upgrades: a gRPC API or
 * one with `websocket: false` refuses them.
 */
function webSocketMethodProblems(config: Config): Problem[] {
  return config.apis.flatMap((api, i) =>
    api.methods.flatMap((method, j): Problem[] => {
      if (method.websocket !== true) return [];
      const path = ['apis', i, 'methods', j, 'websocket'];
      if (api.protocol === 'grpc')
        return [{ path, message: "may not be true in an API of protocol 'grpc', which takes no WebSocket" }];
      if (!api.websocket)
        return [
          { path, message: `may not be true: apis[${i}].websocket is false (the API refuses upgrades)` },
        ];
      if (method.verb !== 'GET')
        return [{ path, message: `may be true only on a GET (a WebSocket opens with a GET, RFC 6455 §4.1)` }];
      return [];
    }),
  );
}

function keyProblems(config: Config, environment: Environment): Problem[] {
  const keys: Array<[string, KeyPath]> = [];
  const addKey = (key: string | undefined, path: KeyPath) => key !== undefined && keys.push([key, path]);
  addKey(config.apikey_development, ['apikey_development']);
  addKey(config.apikey_production, ['apikey_production']);
  config.applications.forEach((app, i) => {
    addKey(app.apikey_development, ['applications', i, 'apikey_development']);
    addKey(app.apikey_production, ['applications', i, 'apikey_production']);
  });
  const problems = firstSeen(keys);
  const appIds = config.applications.map((app, i): [string, KeyPath] => [
    app.id.toLowerCase(),
    ['applications', i, 'id'],
  ]);
  const keyName = `apikey_${environment}` as const;
  const keyScheme = [...schemesInUse(config)].find(([scheme]) => scheme === 'basic' || scheme === 'apikey');
  if (keyScheme && !config[keyName]) {
    const [scheme, where] = keyScheme;
    problems.push({
      path: [keyName],
      message:
        `required when ${formatKeyPath(where)} is '${scheme}': set it, or set ${keyName.toUpperCase()} ` +
        'where the config reads it from the environment (as the shipped conf/default.js does); ' +
        '`gateway start --demo` makes one up for its run',
    });
  }
  return [...problems, ...firstSeen(appIds)];
}

function schemeProblems(config: Config, environment: Environment): Problem[] {
  const problems: Problem[] = [];
  if (config.ldap) {
    const secure = config.ldap.url.startsWith('ldaps:');
    if (secure && config.ldap.startTLS) {
      problems.push({
        path: ['ldap', 'startTLS'],
        message: 'upgrades a plain ldap:// connection; ldaps:// is TLS already',
      });
    }
    if (config.ldap.tlsOptions && !secure && !config.ldap.startTLS) {
      problems.push({
        path: ['ldap', 'tlsOptions'],
        message: 'apply only to an ldaps:// url or with startTLS: true',
      });
    }
  }
  if (environment === 'production') {
    config.admin.users.forEach((user, i) => {
      if (!isPasswordHash(user.password)) {
        problems.push({
          path: ['admin', 'users', i, 'password'],
          message: 'must be a hash from `gateway hash-password` in production, not a plain password',
        });
      }
    });
  }
  return problems;
}

/**
 * Each scheme the config uses, with the first key that names it: `APIKeyAuthType` (when an operation
 * is left to it, or nothing overrides it), then the `auth` of APIs and methods.
 */
export function schemesInUse(config: Config): Map<AuthType, KeyPath> {
  const used = new Map<AuthType, KeyPath>([[config.APIKeyAuthType, ['APIKeyAuthType']]]);
  const note = (auth: OperationAuth | undefined, path: KeyPath) => {
    for (const scheme of typeof auth === 'string' ? [auth] : (auth ?? []))
      if (!used.has(scheme)) used.set(scheme, path);
  };
  config.apis.forEach((api, i) => {
    note(api.auth, ['apis', i, 'auth']);
    api.methods.forEach((method, j) => note(method.auth, ['apis', i, 'methods', j, 'auth']));
  });
  return used;
}

/** The top-level settings each scheme reads, and how a missing one is named. */
const schemeSettingsOf: Partial<Record<AuthType, { key: keyof Config; what: string }>> = {
  jwt: { key: 'jwt', what: 'the top-level jwt settings (issuer, audience, jwksUri or secret)' },
  ldap: { key: 'ldap', what: 'the top-level ldap settings' },
  plugin: { key: 'APIKeyAuthPlugin', what: 'APIKeyAuthPlugin' },
  apikey: { key: 'tls', what: 'tls (keys travel over HTTPS only)' },
};

/**
 * The `auth` of APIs and methods: each scheme it names has its settings at the top level, and a list
 * holds schemes that each read credentials of their own kind (docs/authentication.md).
 */
function operationAuthProblems(config: Config): Problem[] {
  const problems: Problem[] = [];
  const check = (auth: OperationAuth | undefined, path: KeyPath) => {
    if (auth === undefined) return;
    const schemes = typeof auth === 'string' ? [auth] : auth;
    const add = (message: string) => problems.push({ path, message });
    for (const scheme of new Set(schemes)) {
      const settings = schemeSettingsOf[scheme];
      if (settings && config[settings.key] === undefined && config.APIKeyAuthType !== scheme)
        add(`names '${scheme}', which needs ${settings.what}`);
    }
    if (typeof auth === 'string') return;
    if (new Set(auth).size !== auth.length) add('names a scheme twice');
    if (auth.includes('none'))
      add("may not list 'none': a public operation takes no credentials, so say auth: 'none' alone");
    if (auth.includes('plugin') && auth.length > 1)
      add(
        "may not list 'plugin' with other schemes: the plugin reads whatever credentials it likes, so it stands alone",
      );
    if (auth.includes('basic') && auth.includes('ldap'))
      add(
        "may not list both 'basic' and 'ldap': both read Basic credentials, so a request could not say which it means",
      );
  };
  config.apis.forEach((api, i) => {
    check(api.auth, ['apis', i, 'auth']);
    api.methods.forEach((method, j) => check(method.auth, ['apis', i, 'methods', j, 'auth']));
  });
  return problems;
}

/**
 * The jwt settings that hold only together: where the keys of each algorithm come from, and a secret
 * long enough for the HMAC algorithms it serves. A value of the wrong type is the schema's to name.
 */
function jwtProblems(config: Config): Problem[] {
  const { jwt } = config;
  if (!jwt) return [];
  const problems: Problem[] = [];
  const add = (path: KeyPath, message: string) => problems.push({ path: ['jwt', ...path], message });
  const secret = typeof jwt.secret === 'string' ? jwt.secret : undefined;
  const algorithms: unknown[] = Array.isArray(jwt.algorithms) ? jwt.algorithms : [];
  if (!jwt.jwksUri && secret === undefined) add(['jwksUri'], 'is required unless jwt.secret is set');
  if (
    secret !== undefined &&
    Array.isArray(jwt.algorithms) &&
    !algorithms.some((name) => hmacKeyBytes[String(name)])
  )
    add(['secret'], 'is never used: jwt.algorithms names no HMAC algorithm (HS256, HS384, HS512)');
  const secretBytes = secret === undefined ? 0 : bytesOf(secret);
  algorithms.forEach((algorithm, index) => {
    if (typeof algorithm !== 'string') return;
    const needed = hmacKeyBytes[algorithm];
    if (needed !== undefined && secret === undefined)
      add(
        ['algorithms', index],
        `${algorithm} needs jwt.secret (HMAC tokens are never checked with a JWKS key)`,
      );
    // A secret under 32 bytes is named at jwt.secret already.
    if (needed !== undefined && secretBytes >= hmacKeyBytes.HS256! && secretBytes < needed)
      add(
        ['algorithms', index],
        `${algorithm} needs a jwt.secret of at least ${needed} bytes (RFC 7518 section 3.2); it has ${secretBytes}`,
      );
    if ((asymmetricAlgorithms as readonly string[]).includes(algorithm) && !jwt.jwksUri)
      add(
        ['algorithms', index],
        `${algorithm} needs jwt.jwksUri (its keys come from the identity provider's JWKS)`,
      );
  });
  return problems;
}

function listenerProblems(config: Config): Problem[] {
  const problems: Problem[] = [];
  if (config.port === false && !config.tls) {
    problems.push({
      path: ['port'],
      message: 'may be false only with tls: the data plane would have no listener at all',
    });
  }
  if (config.port !== 0 && config.admin.port === config.port) {
    problems.push({ path: ['admin', 'port'], message: 'must differ from port' });
  }
  if (config.server.headersTimeout > config.server.requestTimeout) {
    problems.push({ path: ['server', 'headersTimeout'], message: 'must not exceed server.requestTimeout' });
  }
  if (config.tls && config.tls.port !== 0 && config.tls.port === config.port) {
    problems.push({ path: ['tls', 'port'], message: 'must differ from port' });
  }
  return problems;
}

/**
 * Declared quotas name APIs, methods and applications of this config, each id and application once.
 * A wrong id is echoed as the file spells it (the schema keeps ids in lower case).
 */
function quotaProblems(config: Config, _environment: Environment, given: GivenValue): Problem[] {
  const catalog = catalogIds(config.apis);
  const problems: Problem[] = declaredListProblems(config.quotas, 'quotas').map(({ path, message }) => ({
    path: ['quotas', ...path],
    message,
  }));
  config.applications.forEach((application, i) => {
    if (application.plan === undefined) return;
    const own = config.quotas.findIndex((quota) => quota.application === application.id);
    const problem =
      own === -1
        ? declaredPlanProblem(config.quotas, application.plan)
        : `the application already has a quota at quotas[${own}]`;
    if (problem) problems.push({ path: ['applications', i, 'plan'], message: problem });
  });
  config.quotas.forEach((quota, i) => {
    if (quota.application !== undefined && applicationIdOf(config, quota.application) === null)
      problems.push({
        path: ['quotas', i, 'application'],
        message: `no application of the config has id '${quota.application}'`,
      });
    if (isMembership(quota)) {
      const problem = declaredPlanProblem(config.quotas, quota.plan);
      if (problem) problems.push({ path: ['quotas', i, 'plan'], message: problem });
      return;
    }
    quota.restrictions.forEach((restriction, j) => {
      const path = ['quotas', i, 'restrictions', j];
      const spelt = (field: 'api' | 'method') => {
        const value = given([...path, field]);
        return typeof value === 'string' ? value : restriction[field];
      };
      const problem = referenceProblem(catalog, spelt('api'), spelt('method'), 'apis');
      if (problem) problems.push({ path: [...path, problem.field], message: problem.message });
    });
  });
  return problems;
}
