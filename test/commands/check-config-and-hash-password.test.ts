import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { verifyPassword } from '../../src/kit/password-hash.js';
import { runCli } from '../helpers/run-cli.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { startTestIdentityProvider, type JwksServer } from '../helpers/jwks-server.js';
import { petsConfig, writeConfigDir } from '../helpers/test-gateway.js';

describe('gateway check-config', () => {
  it('exits 2 naming file, key and reason, without a stack trace', async () => {
    const result = await runCli([
      'check-config',
      '--config-dir',
      'test/fixtures/bad-config/upstream-not-http',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'test/fixtures/bad-config/upstream-not-http/default.mjs: apis[1].upstream: must be an http(s) URL\n',
    );
  });

  it("reports Node's SyntaxError for a config that does not parse, with the line and column", async () => {
    const result = await runCli(['check-config', '--config-dir', 'test/fixtures/bad-config/syntax-error']);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^test\/fixtures\/bad-config\/syntax-error\/default\.mjs: line 2, column 1: cannot load: SyntaxError: Unexpected end of input\n$/,
    );
  });

  it.each([
    [
      'plugin-file-missing',
      /^APIKeyAuthPlugin: cannot load '\.\/test\/fixtures\/plugins\/no-such-plugin\.js': Cannot find module/,
    ],
    [
      'plugin-constructor-fails',
      /^APIKeyAuthPlugin: constructing '\.\/test\/fixtures\/plugins\/failing-constructor\.js' failed: missing settings\n$/,
    ],
    [
      'grpc-upstream-with-path',
      /^test\/fixtures\/bad-config\/grpc-upstream-with-path\/default\.mjs: apis\[1\]\.upstream: must have no path in an API of protocol 'grpc': a gRPC call's path is \/<package\.Service>\/<Method> from the server's root \(remove \/helloworld\.Greeter\)\n$/,
    ],
    [
      'usage-path-in-catalog',
      /^usagePath: '\/store\/inventory' is a path of API 'Store' \(GET, its method 'getInventory'\): choose another path, or false\n$/,
    ],
  ])('refuses %s with exit 2, as start does', async (fixture, problem) => {
    const dir = `test/fixtures/bad-config/${fixture}`;
    const checked = await runCli(['check-config', '--config-dir', dir]);
    expect(checked.code).toBe(2);
    expect(checked.stderr).toMatch(problem);
    expect(checked.stdout).not.toContain('config ok');
    const started = await runCli(['start', '--config-dir', dir], { env: { PORT: '0', ADMIN_PORT: '0' } });
    expect(started.code).toBe(2);
    expect(started.stderr).toBe(checked.stderr);
  });

  it('refuses an unknown top-level key (a misspelt port) with exit 2', async () => {
    const result = await runCli([
      'check-config',
      '--config-dir',
      'test/fixtures/bad-config/top-level-key-unknown',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      'test/fixtures/bad-config/top-level-key-unknown/default.mjs: prot: unknown key (did you mean port?)\n',
    );
  });
});

describe('gateway hash-password', () => {
  it('prints an scrypt hash of the password read from standard input', async () => {
    const result = await runCli(['hash-password'], { input: 'correct horse\n' });
    expect(result.code).toBe(0);
    const hash = result.stdout.trim();
    expect(hash).toMatch(/^scrypt\$16384\$8\$1\$[\w-]+\$[\w-]+$/);
    expect(hash).not.toContain('correct horse');
    expect(await verifyPassword('correct horse', hash)).toBe(true);
    expect(await verifyPassword('wrong horse', hash)).toBe(false);
  });

  it('refuses an empty password with exit 2', async () => {
    const result = await runCli(['hash-password'], { input: '\n' });
    expect(result.code).toBe(2);
  });
});

describe('gateway check-config of the jwt scheme', () => {
  const defer = cleanupAfterEach();
  /** A config dir of the jwt scheme over a JWKS endpoint of the test's, one key in it. */
  async function jwtConfig() {
    const { jwks, jwt } = await startTestIdentityProvider(defer);
    const dir = writeConfigDir(petsConfig('http://127.0.0.1:9/pets', { APIKeyAuthType: 'jwt', jwt }));
    defer(() => rmSync(dir, { recursive: true, force: true }));
    return { jwks, dir };
  }

  it('names every mistake of the jwt settings at once, each with its file, key and reason', async () => {
    const dir = 'test/fixtures/bad-config/jwt-mistakes-of-every-rule';
    const result = await runCli(['check-config', '--config-dir', dir]);
    expect(result.code).toBe(2);
    const reasons = [
      'jwt.jwksUri: must be an http(s) URL',
      'jwt.applicationClaim: must not be empty',
      'jwt.algorithms[0]: must not be none: an unsigned token proves nothing (RFC 8725 section 3.1)',
      'jwt.forwardClaims.sub: must not be Host: the gateway sets, drops or frames by that field itself',
      'jwt.forwardClaims.azp: must not be Transfer-Encoding: the gateway sets, drops or frames by that field itself',
      'jwt.algorithms[2]: HS384 needs a jwt.secret of at least 48 bytes (RFC 7518 section 3.2); it has 37',
    ];
    expect(result.stderr).toBe(reasons.map((reason) => `${dir}/default.mjs: ${reason}\n`).join(''));
  });

  it('reaches no JWKS endpoint unless asked to', async () => {
    const { jwks, dir } = await jwtConfig();
    const result = await runCli(['check-config', '--config-dir', dir]);
    expect([result.code, result.stdout]).toEqual([0, expect.stringContaining('config ok')]);
    expect(jwks.fetches).toBe(0);
  });

  it('with --online, fetches the JWK Set once and says how many keys it has', async () => {
    const { jwks, dir } = await jwtConfig();
    const result = await runCli(['check-config', '--config-dir', dir, '--online']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^config ok .*\njwt\.jwksUri: the JWK Set has 1 key: key-1\n$/);
    expect(jwks.fetches).toBe(1);
  });

  it.each([
    ['answers 500', (jwks: JwksServer) => (jwks.down = true), 'the JWKS endpoint answered 500'],
    [
      'answers a document that is not a JWK Set',
      (jwks: JwksServer) => (jwks.body = '{"keys": "none"}'),
      'JSON Web Key Set malformed',
    ],
    ['is not listening', (jwks: JwksServer) => jwks.close(), 'fetch failed (connect ECONNREFUSED 127.0.0.1:'],
  ])('with --online, exits 1 saying why when the endpoint %s', async (_case, spoil, reason) => {
    const { jwks, dir } = await jwtConfig();
    await spoil(jwks);
    const result = await runCli(['check-config', '--config-dir', dir, '--online']);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/^config ok /);
    expect(result.stderr).toContain(`jwt.jwksUri: cannot fetch the JWK Set: ${reason}`);
    expect(result.stderr).not.toContain(jwks.url);
  });
});

describe('gateway check-config of schemes per API', () => {
  const defer = cleanupAfterEach();

  it('says the schemes APIs and methods name, and with --online fetches the JWK Set of a jwt only they name', async () => {
    const { jwks, jwt } = await startTestIdentityProvider(defer);
    const config = petsConfig('http://127.0.0.1:9/pets', { jwt });
    const [pets] = config.apis as Array<Record<string, unknown>>;
    const dir = writeConfigDir({
      ...config,
      apis: [
        { ...pets, auth: ['jwt', 'basic'], methods: [{ ...(pets!.methods as object[])[0], auth: 'none' }] },
      ],
    });
    defer(() => rmSync(dir, { recursive: true, force: true }));
    const result = await runCli(['check-config', '--config-dir', dir, '--online']);
    expect(result.code).toBe(0);
    expect(result.stdout).toBe(
      'config ok (development): 1 APIs, 0 applications, APIKeyAuthType basic (APIs or methods: jwt, none), store memory\n' +
        'jwt.jwksUri: the JWK Set has 1 key: key-1\n',
    );
    expect(jwks.fetches).toBe(1);
  });
});
