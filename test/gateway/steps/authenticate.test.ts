import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthResult } from '../../../src/auth/authenticator.js';
import { authenticate } from '../../../src/gateway/steps/authenticate.js';
import { route } from '../../../src/gateway/steps/route.js';
import { answeringAuthenticator, recordServer, stepContext, stepRuleSet } from '../../helpers/step-parts.js';

describe('the authenticate step', () => {
  const { context } = stepContext();
  let close: () => Promise<void> = () => Promise.resolve();
  afterEach(() => close());

  /** A server whose requests are routed, then authenticated by an authenticator that answers `result`. */
  async function serve(result: AuthResult, wait = false) {
    const { authenticator, seen } = answeringAuthenticator(result, wait);
    const verdicts: boolean[] = [];
    const server = await recordServer(stepRuleSet(authenticator), async (record) => {
      if (route(context, record)) verdicts.push(await authenticate(context, record));
    });
    close = server.close;
    return { ...server, seen, verdicts };
  }

  it('shows the authenticator the routed path, and takes its principal without a promise when it answers at once', async () => {
    const principal = { application: 'app-1', subject: 'ann' };
    const server = await serve({ ok: true, principal });
    expect((await request(`${server.url}/PETS/42?x=1`)).statusCode).toBe(204);
    expect(server.seen).toEqual(['/pets/42?x=1']);
    // The pipeline never writes req.url: it keeps what the client sent.
    expect(server.records[0]!.req.url).toBe('/PETS/42?x=1');
    expect(server.verdicts).toEqual([true]);
    expect(server.records[0]!.principal).toBe(principal);
  });

  it('answers 401 with the challenge of a scheme that refused, and goes no further', async () => {
    const server = await serve({ ok: false, reject: 'unauthorized', challenge: 'Basic realm="pets"' }, true);
    const { statusCode, headers } = await request(`${server.url}/pets/42`);
    expect(statusCode).toBe(401);
    expect(headers['www-authenticate']).toBe('Basic realm="pets"');
    expect(server.verdicts).toEqual([false]);
    expect(server.records[0]!.principal).toBeNull();
  });

  it('answers 503 when the directory could not answer', async () => {
    const server = await serve({ ok: false, reject: 'service_unavailable' }, true);
    expect((await request(`${server.url}/pets/42`)).statusCode).toBe(503);
    expect(server.records[0]!.status).toBe(503);
  });

  it('marks a request a plugin declined to validate, but not a read of the usage path', async () => {
    const server = await serve({ ok: true, principal: null, unvalidated: true });
    await request(`${server.url}/pets/42`);
    await request(`${server.url}/_quotagate/usage`);
    expect(server.records.map((record) => record.unvalidated)).toEqual([true, false]);
  });
});
