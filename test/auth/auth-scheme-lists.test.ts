import { rmSync } from 'node:fs';
import https from 'node:https';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ldapSettingsOf } from '../helpers/slapd-server.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { createTestCertificate, type TestCertificate } from '../helpers/tls-cert.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const ldap = inject('ldap');
const secret = 'a-shared-secret-of-at-least-32-bytes!';
const jwt = { issuer: 'idp', audience: 'api', secret };
const challenges = {
  jwt: 'Bearer realm="quotagate"',
  basic: 'Basic realm="quotagate", charset="UTF-8"',
  ldap: 'Basic realm="quotagate", charset="UTF-8"',
  apikey: 'APIKey realm="quotagate", field="APIKey"',
} as const;
type Listed = keyof typeof challenges;

/** Every list a config may hold (not basic with ldap), each an API of its own at `/<schemes>`. */
const lists: Listed[][] = [
  ['jwt', 'basic'],
  ['jwt', 'apikey'],
  ['basic', 'apikey'],
  ['jwt', 'basic', 'apikey'],
  ['jwt', 'ldap'],
  ['ldap', 'apikey'],
  ['jwt', 'ldap', 'apikey'],
];
const basePathOf = (list: readonly Listed[]) => `/${list.join('-')}`;
const apiOf = (list: readonly Listed[], index: number, upstream: string) => {
  const hex = index.toString(16).padStart(2, '0');
  return {
    id: `${hex}000000-0000-4000-8000-0000000000${hex}`,
    name: list.join('+'),
    basePath: basePathOf(list),
    upstream,
    auth: list,
    methods: [{ id: `${hex}111111-1111-4111-8111-1111111111${hex}`, name: 'get', verb: 'GET', path: '/x' }],
  };
};

let upstream: TestUpstream;
let certificate: TestCertificate;
let gateway: TestGateway;
beforeAll(async () => {
  upstream = await startUpstream();
  certificate = await createTestCertificate();
  gateway = await startTestGateway(
    petsConfig(upstream.url, {
      tls: { port: 0, key: certificate.keyFile, cert: certificate.certFile },
      jwt,
      ldap: ldapSettingsOf(ldap),
      apis: lists.map((list, i) => apiOf(list, i, upstream.url)),
    }),
  );
});
afterAll(async () => {
  await gateway.close();
  await upstream.close();
  rmSync(certificate.dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  challenges: string[];
}

/** GETs `path` over HTTPS with `headers` (an array sends the field once per value). */
function get(path: string, headers: Record<string, string | string[]>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    https
      .get(
        {
          host: '127.0.0.1',
          port: gateway.running.ports.https,
          path,
          ca: certificate.cert,
          headers,
          agent: false,
        },
        (res) => {
          res.resume();
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              challenges: res.headersDistinct['www-authenticate'] ?? [],
            }),
          );
        },
      )
      .on('error', reject);
  });
}

const token = (claims: Record<string, unknown> = {}) =>
  new SignJWT({ iss: 'idp', aud: 'api', sub: 'user-1', client_id: 'app-a', ...claims })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(secret));
const alice = ldap.users.find((user) => user.uid === 'alice')!;
const ldapBasic = (password: string) => `Basic ${Buffer.from(`alice:${password}`).toString('base64')}`;

/** Good credentials of each scheme, and bad ones of the same kind. */
const credentials = async (scheme: Listed, good: boolean): Promise<Record<string, string>> => {
  switch (scheme) {
    case 'jwt':
      return { authorization: `Bearer ${good ? await token() : `${await token()}x`}` };
    case 'basic':
      return { authorization: basicAuth(good ? devKey : 'not-a-key-0123456789abcdef') };
    case 'ldap':
      return { authorization: ldapBasic(good ? alice.password : 'wrong') };
    case 'apikey':
      return { apikey: good ? devKey : 'not-a-key-0123456789abcdef' };
  }
};

const lastAccessLine = async () => {
  await new Promise((resolve) => setImmediate(resolve));
  return gateway.logs.filter((line) => line.msg === 'request').at(-1);
};

describe.each(lists.map((list) => [list.join('+'), list] as const))('the list %s', (_name, list) => {
  const path = `${basePathOf(list)}/x`;

  it.each(list)('admits good %s credentials, as the application they name', async (scheme) => {
    expect((await get(path, await credentials(scheme, true))).status).toBe(200);
    const application = { jwt: 'app-a', basic: 'project', ldap: alice.dn, apikey: 'project' }[scheme];
    // The scheme's name, said in the config, is no secret to take out of the log.
    expect(await lastAccessLine()).toMatchObject({ status: 200, application, path });
  });

  it('refuses a request without credentials with one challenge per scheme listed', async () => {
    const answer = await get(path, {});
    expect(answer).toEqual({ status: 401, challenges: list.map((scheme) => challenges[scheme]) });
  });

  it.each(list)('refuses bad %s credentials, never trying the next scheme', async (scheme) => {
    const before = upstream.requests.length;
    const answer = await get(path, await credentials(scheme, false));
    expect(answer.status).toBe(401);
    expect(upstream.requests.length).toBe(before);
  });

  it('refuses good credentials of two listed schemes at once, whichever field carries them', async () => {
    const [first, second] = list.filter((scheme) => scheme !== 'apikey') as [Listed, Listed?];
    const fields = list.includes('apikey')
      ? { ...(await credentials(first, true)), ...(await credentials('apikey', true)) }
      : {
          authorization: [
            (await credentials(first, true)).authorization!,
            (await credentials(second!, true)).authorization!,
          ],
        };
    const before = upstream.requests.length;
    expect(await get(path, fields)).toEqual({
      status: 401,
      challenges: list.map((scheme) => challenges[scheme]),
    });
    expect(upstream.requests.length).toBe(before);
    expect(await lastAccessLine()).toMatchObject({ status: 401, reason: 'several_credentials' });
  });
});

describe('the attacks on a list', () => {
  const both = `${basePathOf(['jwt', 'basic'])}/x`;

  it('refuses a failed Bearer followed by valid Basic credentials in a second Authorization field', async () => {
    const before = upstream.requests.length;
    const forged = `Bearer ${await token()}x`;
    for (const authorization of [
      [forged, basicAuth(devKey)],
      [basicAuth(devKey), forged],
    ]) {
      const answer = await get(both, { authorization });
      expect(answer, authorization.join(' then ')).toEqual({
        status: 401,
        challenges: [challenges.jwt, challenges.basic],
      });
    }
    expect(upstream.requests.length).toBe(before);
  });

  it('refuses a failed Bearer, then takes valid Basic credentials sent alone', async () => {
    expect((await get(both, { authorization: `Bearer ${await token({ aud: 'other' })}` })).status).toBe(401);
    expect((await get(both, { authorization: basicAuth(devKey) })).status).toBe(200);
  });

  it('refuses credentials of a scheme the list does not hold, with the challenges of the ones it does', async () => {
    const jwtAndKey = `${basePathOf(['jwt', 'apikey'])}/x`;
    expect(await get(jwtAndKey, { authorization: basicAuth(devKey) })).toEqual({
      status: 401,
      challenges: [challenges.jwt, challenges.apikey],
    });
  });

  it('reads the auth-scheme without case, as RFC 9110 section 11.1 says', async () => {
    expect((await get(both, { authorization: `bEARER ${await token()}` })).status).toBe(200);
    expect((await get(both, { authorization: basicAuth(devKey).replace('Basic', 'BASIC') })).status).toBe(
      200,
    );
  });
});
