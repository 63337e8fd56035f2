import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { gatewayOwnedFields } from '../../src/kit/gateway-owned-fields.js';
import { greeterApi } from '../helpers/grpc-greeter.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';
import { createTestCertificate } from '../helpers/tls-cert.js';
import { badConfig, problemsOf } from '../helpers/config-problems.js';

// One fixture per rule: each changes the valid base.mjs in exactly one way.
const rules: Array<[string, string]> = [
  ['port-out-of-range', 'port: must be an integer from 0 to 65535, or false (no plain-HTTP listener)'],
  ['port-not-a-number', 'port: must be an integer from 0 to 65535, or false (no plain-HTTP listener)'],
  [
    'port-false-without-tls',
    'port: may be false only with tls: the data plane would have no listener at all',
  ],
  ['auth-type-unknown', 'APIKeyAuthType: must be one of none, basic, apikey, ldap, plugin, jwt'],
  [
    'auth-type-misspelt',
    'APIKeyAuthType: must be one of none, basic, apikey, ldap, plugin, jwt (did you mean basic?)',
  ],
  ['jwt-missing', "jwt: required when APIKeyAuthType is 'jwt'"],
  ['auth-type-near-miss-settings', 'jwt.audeince: unknown key (did you mean audience?)'],
  ['jwt-no-key-source', 'jwt.jwksUri: is required unless jwt.secret is set'],
  [
    'jwt-hmac-without-secret',
    'jwt.algorithms[0]: HS256 needs jwt.secret (HMAC tokens are never checked with a JWKS key)',
  ],
  [
    'jwt-algorithm-none',
    'jwt.algorithms[1]: must not be none: an unsigned token proves nothing (RFC 8725 section 3.1)',
  ],
  [
    'jwt-secret-unused',
    'jwt.secret: is never used: jwt.algorithms names no HMAC algorithm (HS256, HS384, HS512)',
  ],
  [
    'jwt-secret-too-short',
    'jwt.secret: must be at least 32 bytes (RFC 7518 section 3.2: as long as the HS256 hash)',
  ],
  [
    'jwt-secret-short-for-hs512',
    'jwt.algorithms[0]: HS512 needs a jwt.secret of at least 64 bytes (RFC 7518 section 3.2); it has 37',
  ],
  ['jwt-jwks-uri-not-http', 'jwt.jwksUri: must be an http(s) URL'],
  [
    'jwt-asymmetric-without-jwks-uri',
    "jwt.algorithms[1]: ES256 needs jwt.jwksUri (its keys come from the identity provider's JWKS)",
  ],
  ['jwt-application-claim-empty', 'jwt.applicationClaim: must not be empty'],
  [
    'jwt-forward-claim-gateway-field',
    'jwt.forwardClaims.ip: must not be X-Forwarded-For: the gateway sets, drops or frames by that field itself',
  ],
  [
    'current-key-missing',
    "apikey_development: required when APIKeyAuthType is 'basic': set it, or set APIKEY_DEVELOPMENT where the config reads it from the environment (as the shipped conf/default.js does); `gateway start --demo` makes one up for its run",
  ],
  ['key-too-short', 'apikey_development: must be at least 16 characters (generate one with gateway init)'],
  ['keys-equal', 'apikey_production: duplicate of apikey_development'],
  ['api-id-not-uuid', 'apis[0].id: must be a UUID'],
  ['api-id-duplicate', 'apis[1].id: duplicate of apis[0].id'],
  ['api-field-missing', 'apis[0].name: is required'],
  [
    'base-path-trailing-slash',
    'apis[0].basePath: must be an absolute path like /pets (no trailing slash, no dot segments, no parameters, no ;)',
  ],
  ['base-path-duplicate', 'apis[1].basePath: duplicate of apis[0].basePath'],
  ['upstream-not-http', 'apis[1].upstream: must be an http(s) URL'],
  ['upstream-with-query', 'apis[1].upstream: must not carry a query or a fragment'],
  ['upstream-with-credentials', 'apis[1].upstream: must not carry credentials'],
  ['method-verb-unknown', 'apis[0].methods[0].verb: must be one of GET, POST, PUT, PATCH, DELETE, OPTIONS'],
  [
    'method-path-invalid',
    'apis[0].methods[0].path: must be a path template like /{petId} or /findByStatus (no ;, no segment ending in a dot)',
  ],
  [
    'method-path-matrix',
    'apis[0].methods[0].path: must be a path template like /{petId} or /findByStatus (no ;, no segment ending in a dot)',
  ],
  ['base-path-case-duplicate', 'apis[1].basePath: duplicate of apis[0].basePath'],
  ['method-route-case-duplicate', 'apis[0].methods[1].path: duplicate of apis[0].methods[0].path'],
  ['pass-undeclared-not-boolean', 'apis[0].passUndeclared: must be true or false'],
  ['websocket-not-boolean', 'apis[0].websocket: must be true or false'],
  ['protocol-unknown', "apis[0].protocol: must be 'http' or 'grpc' (did you mean http?)"],
  [
    'grpc-method-not-post',
    "apis[1].methods[0].verb: must be POST in an API of protocol 'grpc' (every gRPC call is a POST)",
  ],
  [
    'grpc-upstream-with-path',
    "apis[1].upstream: must have no path in an API of protocol 'grpc': a gRPC call's path is /<package.Service>/<Method> from the server's root (remove /helloworld.Greeter)",
  ],
  [
    'upstream-target-paths-differ',
    'apis[1].upstream.targets[1]: must have the path of targets[0] (/store), not /shop: every target of an API is sent the same path',
  ],
  [
    'grpc-pool-target-with-path',
    "apis[1].upstream.targets[0]: must have no path in an API of protocol 'grpc': a gRPC call's path is /<package.Service>/<Method> from the server's root (remove /helloworld.Greeter)",
  ],
  [
    'grpc-pool-health-check-path',
    "apis[1].upstream.healthCheck.path: is not available in an API of protocol 'grpc': its targets are checked by the gRPC health checking protocol (use service: the name of a service, or '' for the whole server)",
  ],
  [
    'upstream-health-check-service',
    "apis[1].upstream.healthCheck.service: is only for an API of protocol 'grpc': an HTTP API's targets are checked with a GET of path",
  ],
  ['health-check-no-path', 'apis[1].upstream.healthCheck.path: is required (the path of its GETs, /healthz)'],
  ['upstream-balance-unknown', "apis[1].upstream.balance: must be 'round-robin' or 'least-requests'"],
  [
    'upstream-target-weight-zero',
    'apis[1].upstream.targets[0].weight: must be a whole number from 1 to 1000',
  ],
  [
    'upstream-outlier-failures-zero',
    'apis[1].upstream.outlierDetection.consecutiveFailures: must be a whole number of at least 1',
  ],
  [
    'upstream-dns-refresh-short',
    'apis[1].upstream.dnsRefresh: must be a whole number of milliseconds, at least 1000',
  ],
  [
    'websocket-method-without-upgrades',
    'apis[1].methods[0].websocket: may not be true: apis[1].websocket is false (the API refuses upgrades)',
  ],
  ['method-route-duplicate', 'apis[0].methods[1].path: duplicate of apis[0].methods[0].path'],
  ['method-id-duplicate', 'apis[1].methods[0].id: duplicate of apis[0].methods[0].id'],
  ['nested-key-unknown', 'admin.prot: unknown key (did you mean port?)'],
  ['store-key-misspelt', 'store.prefx: unknown key (did you mean prefix?)'],
  ['api-key-misspelt', 'apis[0].upstrem: unknown key (did you mean upstream?)'],
  ['store-type-unknown', 'store.type: must be memory or redis'],
  ['redis-url-missing', "store.url: required when store.type is 'redis' (or set store.cluster)"],
  ['redis-url-invalid', 'store.url: must be a redis:// or rediss:// URL'],
  ['store-on-error-unknown', 'store.onError: must be local, allow or deny'],
  ['store-on-error-misspelt', 'store.onError: must be local, allow or deny (did you mean allow?)'],
  [
    'store-redis-key-without-type',
    "store.url: applies to store.type 'redis' only (the store is 'memory' unless it says so)",
  ],
  [
    'quota-period-misspelt',
    'quotas[0].restrictions[0].config.period: must be one of second, seconds, minute, minutes, hour, hours, day, days, week, weeks, month, months, year, years (did you mean seconds?)',
  ],
  ['counter-memory-too-small', 'store.maxCounterMemoryMb: must be a number of MiB from 1 to 1048576'],
  ['admin-port-clash', 'admin.port: must differ from port'],
  ['admin-role-unknown', 'admin.users[0].role: must be admin or member'],
  [
    'tls-files-missing',
    'tls.key: cannot read test/fixtures/bad-config/tls-files-missing/missing-key.pem (ENOENT)',
  ],
  ['apikey-without-tls', "tls: required when APIKeyAuthType is 'apikey' (keys travel over HTTPS only)"],
  ['ldap-settings-missing', "ldap: required when APIKeyAuthType is 'ldap'"],
  ['ldap-filter-without-placeholder', 'ldap.searchFilter: must contain the placeholder {{username}}'],
  ['ldap-tls-options-unused', 'ldap.tlsOptions: apply only to an ldaps:// url or with startTLS: true'],
  ['ldap-start-tls-on-ldaps', 'ldap.startTLS: upgrades a plain ldap:// connection; ldaps:// is TLS already'],
  ['plugin-path-missing', "APIKeyAuthPlugin: required when APIKeyAuthType is 'plugin'"],
  ['trust-proxy-bad-cidr', 'trustProxy[0]: must be an IP address or CIDR'],
  ['proxy-timeout-negative', 'proxyTimeout: must be a positive number of milliseconds'],
  ['upstream-drain-limit-zero', 'upstreamDrainLimit: must be a whole number of at least 1'],
  ['headers-timeout-too-long', 'server.headersTimeout: must not exceed server.requestTimeout'],
  ['websocket-max-frame-too-small', 'server.webSocketMaxFrame: must be at least 1024 bytes'],
  ['forward-credentials-not-boolean', 'forwardCredentials: must be true or false'],
  ['application-key-reused', 'applications[0].apikey_development: duplicate of apikey_development'],
  ['application-id-duplicate', 'applications[1].id: duplicate of applications[0].id'],
  ['not-an-object', 'must export an object (module.exports = { ... })'],
  ['top-level-key-unknown', 'prot: unknown key (did you mean port?)'],
  ['key-unlike-any', 'zzqx: unknown key'],
  [
    'plugin-key-undeclared',
    "secrte: unknown key (the plugin './test/fixtures/plugins/quoting-plugin.js' declares secret in its static configKeys)",
  ],
];

describe('loadConfig: one bad-config fixture per rule', () => {
  it.each(rules)('rejects %s with the file, the key path and the reason', async (name, message) => {
    const file = `${badConfig(name)}/default.mjs`;
    expect(await problemsOf(badConfig(name))).toContain(`${file}: ${message}`);
  });

  it('rejects a folder without default.js or default.yaml', async () => {
    expect(await problemsOf(badConfig('no-default-file'))).toEqual([
      'test/fixtures/bad-config/no-default-file: no default.js or default.yaml here (create one with gateway init)',
    ]);
  });

  it('rejects two default files side by side', async () => {
    expect(await problemsOf(badConfig('two-default-files'))).toEqual([
      'test/fixtures/bad-config/two-default-files: both default.mjs and default.yaml exist; keep one',
    ]);
  });

  // The exact SyntaxError text is Node's; test/cli checks it through the real CLI, where vitest's module
  // runner does not stand between the loader and Node.
  it('rejects a JavaScript syntax error naming the file', async () => {
    const [problem] = await problemsOf(badConfig('syntax-error'));
    expect(problem).toMatch(/^test\/fixtures\/bad-config\/syntax-error\/default\.mjs: cannot load: /);
  });

  it('rejects a YAML syntax error naming the file, the line and column, the reason, and showing the spot', async () => {
    const [problem] = await problemsOf(badConfig('yaml-syntax-error'));
    expect(problem!.split('\n')).toEqual([
      'test/fixtures/bad-config/yaml-syntax-error/default.yaml: line 4, column 1: cannot parse: Sequence item without - indicator',
      '      - id: a',
      '       name: b',
      '    ^',
    ]);
  });

  it('puts an indentation mistake on the line indented too far, not on the line before it', async () => {
    const [problem] = await problemsOf(badConfig('yaml-indented-too-far'));
    expect(problem!.split('\n')).toEqual([
      'test/fixtures/bad-config/yaml-indented-too-far/default.yaml: line 4, column 5: cannot parse: Nested mappings are not allowed in compact mappings (this line is indented more than the key above it)',
      '      port: 8081',
      '        users: []',
      '        ^',
    ]);
  });

  it('rejects a plain admin password in production', async () => {
    expect(await problemsOf(badConfig('production-plain-password'), { NODE_ENV: 'production' })).toContain(
      'test/fixtures/bad-config/production-plain-password/default.mjs: admin.users[0].password: must be a hash from `gateway hash-password` in production, not a plain password',
    );
  });

  it('blames the overlay file for a mistake the overlay made', async () => {
    expect(await problemsOf(badConfig('overlay-mistake'), { NODE_ENV: 'production' })).toEqual([
      'test/fixtures/bad-config/overlay-mistake/production.mjs: proxyTimeout: must be a whole number of milliseconds',
    ]);
  });

  it('blames the environment for a bad PORT', async () => {
    const configDir = 'test/fixtures/config/esm-overlay';
    expect(await problemsOf(configDir, { PORT: 'eighty' })).toEqual([
      'environment (PORT): port: must be an integer from 0 to 65535, or false (no plain-HTTP listener)',
    ]);
  });

  it('reports every problem at once, not only the first', async () => {
    const problems = await problemsOf('test/fixtures/bad-config/upstream-not-http', { PORT: '99999' });
    expect(problems).toHaveLength(2);
  });

  it('reports the cross-key rules in the same pass as the key types: nothing hides behind a first mistake', async () => {
    expect(await problemsOf('test/fixtures/bad-config/mistakes-of-every-stage')).toEqual([
      "test/fixtures/bad-config/mistakes-of-every-stage/default.mjs: store.url: required when store.type is 'redis' (or set store.cluster)",
      'test/fixtures/bad-config/mistakes-of-every-stage/default.mjs: apis[0].id: must be a UUID',
      'test/fixtures/bad-config/mistakes-of-every-stage/default.mjs: apis[1].basePath: duplicate of apis[0].basePath',
      'test/fixtures/bad-config/mistakes-of-every-stage/default.mjs: prot: unknown key (did you mean port?)',
    ]);
  });
});

describe('loadConfig: a misspelt scheme', () => {
  it('reads the settings of the scheme it most likely means, and names their mistakes with it', async () => {
    const file = `${badConfig('auth-type-near-miss-settings')}/default.mjs`;
    expect(await problemsOf(badConfig('auth-type-near-miss-settings'))).toEqual([
      `${file}: APIKeyAuthType: must be one of none, basic, apikey, ldap, plugin, jwt (did you mean jwt?)`,
      `${file}: jwt.audience: is required`,
      `${file}: jwt.audeince: unknown key (did you mean audience?)`,
    ]);
  });
});

describe('loadConfig: the fields the gateway owns', () => {
  it('refuses every one of them, in any case, as a field of jwt.forwardClaims, and no other', async () => {
    const owned = [...gatewayOwnedFields];
    const forwardClaims = Object.fromEntries([
      ...owned.map((field, i) => [`claim${i}`, i % 2 === 0 ? field.toUpperCase() : field]),
      ['sub', 'X-User'],
    ]);
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9/pets', {
        APIKeyAuthType: 'jwt',
        jwt: { jwksUri: 'https://sso.example.org/certs', issuer: 'idp', audience: 'api', forwardClaims },
      }),
    );
    try {
      const problems = await problemsOf(dir);
      expect(problems).toHaveLength(owned.length);
      expect(problems.every((problem) => /jwt\.forwardClaims\.claim\d+: must not be /.test(problem))).toBe(
        true,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('loadConfig: valid configs', () => {
  it('loads a CommonJS default.cjs, applies defaults and upper-cases verbs', async () => {
    const { config, environment } = await loadConfig({
      configDir: 'test/fixtures/config/cjs',
      env: {},
    });
    expect(environment).toBe('development');
    expect(config.port).toBe(8080);
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 8081, users: [], allowedHosts: [] });
    expect(config.store).toEqual({ type: 'memory', file: 'data/quotas.json', maxCounterMemoryMb: 128 });
    expect(config.proxyTimeout).toBe(30_000);
    expect(config.apis[0]).toMatchObject({ caseSensitive: false, passUndeclared: false, protocol: 'http' });
    expect(config.apis[0]?.methods[0]?.verb).toBe('GET');
  });

  it('loads YAML', async () => {
    const { config } = await loadConfig({ configDir: 'test/fixtures/config/yaml', env: {} });
    expect(config.port).toBe(9090);
    expect(config.apis[0]?.methods).toEqual([]);
  });

  it('takes the top-level keys the auth plugin declares, for the plugin only', async () => {
    const { config, extras } = await loadConfig({
      configDir: 'test/fixtures/config/plugin-keys',
      env: {},
    });
    expect(extras).toEqual({ secret: 'a-long-shared-secret-0123456789' });
    expect(config).not.toHaveProperty('secret');
  });

  it('overlays <NODE_ENV>.mjs key by key, then PORT, ADMIN_PORT and REDIS_URL', async () => {
    const { config, environment } = await loadConfig({
      configDir: 'test/fixtures/config/esm-overlay',
      env: { NODE_ENV: 'production', PORT: '7070', REDIS_URL: 'redis://127.0.0.1:6390' },
    });
    expect(environment).toBe('production');
    expect(config.port).toBe(7070);
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 9191, users: [], allowedHosts: [] });
    expect(config.proxyTimeout).toBe(5000);
    expect(config.store).toMatchObject({
      type: 'redis',
      url: 'redis://127.0.0.1:6390',
      file: 'data/quotas.json',
    });

    const withAdminPort = await loadConfig({
      configDir: 'test/fixtures/config/esm-overlay',
      env: { ADMIN_PORT: '9292' },
    });
    expect(withAdminPort.config.admin.port).toBe(9292);
  });

  it('takes port: false with tls: no plain-HTTP listener', async () => {
    const certificate = await createTestCertificate();
    const dir = writeConfigDir({
      ...petsConfig('http://127.0.0.1:9'),
      port: false,
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
    });
    try {
      expect((await loadConfig({ configDir: dir, env: {} })).config.port).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
      rmSync(certificate.dir, { recursive: true, force: true });
    }
  });

  it("takes a gRPC API's upstream URL with no path or a bare /, the server's root", async () => {
    const dir = writeConfigDir(
      petsConfig('http://127.0.0.1:9', {
        apis: [
          { ...greeterApi('http://127.0.0.1:50051'), id: '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e' },
          {
            ...greeterApi('https://greeter.test/'),
            basePath: '/helloworld.Other',
            methods: [
              {
                id: '5d6e7f8a-9b0c-4d1e-8f2a-3b4c5d6e7f8a',
                name: 'SayHello',
                verb: 'POST',
                path: '/SayHello',
              },
            ],
          },
        ],
      }),
    );
    try {
      const { config } = await loadConfig({ configDir: dir, env: {} });
      expect(config.apis.map((api) => api.upstream)).toEqual([
        'http://127.0.0.1:50051',
        'https://greeter.test/',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('freezes the result all the way down', async () => {
    const { config } = await loadConfig({ configDir: 'test/fixtures/config/cjs', env: {} });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.apis[0]?.methods[0])).toBe(true);
    expect(() => {
      (config as { port: number }).port = 1;
    }).toThrow(TypeError);
  });
});
