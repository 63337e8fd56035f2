import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { route } from '../../../src/gateway/steps/route.js';
import { answeringAuthenticator, recordServer, stepContext, stepRuleSet } from '../../helpers/step-parts.js';

describe('the route step', () => {
  const { context } = stepContext();
  const { authenticator } = answeringAuthenticator({ ok: true, principal: null });
  const verdicts: boolean[] = [];
  let server: Awaited<ReturnType<typeof recordServer>>;

  beforeAll(async () => {
    server = await recordServer(stepRuleSet(authenticator), (record) =>
      verdicts.push(route(context, record)),
    );
  });
  afterAll(() => server.close());

  const last = () => server.records.at(-1)!;

  it('sets the routed path and the upstream target as two fields, and leaves req.url as the client sent it', async () => {
    const { statusCode } = await request(`${server.url}/PETS/42?x=1`);
    expect(statusCode).toBe(204);
    expect(verdicts.at(-1)).toBe(true);
    const record = last();
    expect(record.routedPath).toBe('/pets/42?x=1');
    expect(record.upstreamTarget).toBe('/v2/42?x=1');
    expect(record.req.url).toBe('/PETS/42?x=1');
    expect(record.route?.method?.id).toBe('getPet');
  });

  it('answers 404 to a path of no API, and goes no further', async () => {
    const { statusCode, body } = await request(`${server.url}/cats/1`);
    expect(statusCode).toBe(404);
    expect(await body.json()).toMatchObject({ id: 'com.vendor.api.not_found' });
    expect(verdicts.at(-1)).toBe(false);
    expect(last().status).toBe(404);
  });

  it('answers 405 with Allow to a verb no method of a declared path takes', async () => {
    const { statusCode, headers } = await request(`${server.url}/pets/42`, { method: 'DELETE' });
    expect(statusCode).toBe(405);
    expect(headers.allow).toBe('GET, PUT, HEAD');
  });

  it('refuses a target-override field before routing (400)', async () => {
    const { statusCode } = await request(`${server.url}/pets/42`, {
      headers: { 'x-original-url': '/admin' },
    });
    expect(statusCode).toBe(400);
    expect(last().route).toBeNull();
  });

  it('refuses a gRPC API over HTTP/1.1 with 505, as the edge read the version', async () => {
    const { statusCode, body } = await request(`${server.url}/helloworld.Greeter/SayHello`, {
      method: 'POST',
      headers: { 'content-type': 'application/grpc' },
      body: '',
    });
    expect(statusCode).toBe(505);
    expect(((await body.json()) as { message: string }).message).toContain('over HTTP/2');
    expect(last().version).toBe('HTTP/1.1');
  });

  it('marks the usage path for the usage step, with its path as routed, and 405 to other verbs than GET', async () => {
    expect((await request(`${server.url}/_quotagate/usage?q=1`)).statusCode).toBe(204);
    expect(last().readsUsage).toBe(true);
    expect(last().routedPath).toBe('/_quotagate/usage?q=1');
    const { statusCode, headers } = await request(`${server.url}/_quotagate/usage`, {
      method: 'POST',
      body: '',
    });
    expect(statusCode).toBe(405);
    expect(headers.allow).toBe('GET, HEAD');
  });
});
