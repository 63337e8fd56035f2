import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { admit } from '../../../src/gateway/steps/admit.js';
import { route } from '../../../src/gateway/steps/route.js';
import type { StoredQuota } from '../../../src/quota/model.js';
import { systemQuotaId } from '../../../src/quota/quota-terms.js';
import { answeringAuthenticator, recordServer, stepContext, stepRuleSet } from '../../helpers/step-parts.js';

type Restriction = StoredQuota['quota']['restrictions'][number];

const systemQuota = (restrictions: Restriction[]): StoredQuota => ({
  quota: { id: systemQuotaId, type: 'API', name: 'system', description: '', restrictions, system: true },
  etag: '"1"',
});
const requests = (messages: string, mode?: 'shadow'): Restriction => ({
  api: '*',
  method: '*',
  type: 'throttle',
  config: { messages, per: '1', period: 'minute' },
  ...(mode ? { mode } : {}),
});
const megabytes = (mb: string): Restriction => ({
  api: '*',
  method: '*',
  type: 'throttlemb',
  config: { mb, per: '1', period: 'minute' },
});

describe('the admit step', () => {
  let close: () => Promise<void> = () => Promise.resolve();
  afterEach(() => close());

  async function serve(restrictions: Restriction[]) {
    const parts = stepContext([systemQuota(restrictions)]);
    const { authenticator } = answeringAuthenticator({ ok: true, principal: null });
    const verdicts: boolean[] = [];
    const server = await recordServer(stepRuleSet(authenticator), async (record) => {
      if (route(parts.context, record)) verdicts.push(await admit(parts.context, record));
    });
    close = server.close;
    return { ...server, ...parts, verdicts };
  }

  it('admits within the limit without a promise, with the RateLimit fields, and refuses past it with 429', async () => {
    const server = await serve([requests('1')]);
    const first = await request(`${server.url}/pets/1`);
    expect(first.statusCode).toBe(204);
    const admitted = server.records[0]!;
    expect(admitted.quota).toBe('allowed');
    expect(admitted.fields).toContain('ratelimit');
    const second = await request(`${server.url}/pets/1`);
    expect(second.statusCode).toBe(429);
    expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
    expect(second.headers.ratelimit).toMatch(/;r=0;/);
    expect(server.records[1]!.quota).toBe('rejected');
    expect(server.records[1]!.refusedBy).toBe(`${systemQuotaId}/0`);
    expect(server.verdicts).toEqual([true, false]);
  });

  it('lets a request a shadow restriction would refuse go on, and names that restriction', async () => {
    const server = await serve([requests('1', 'shadow')]);
    await request(`${server.url}/pets/1`);
    expect((await request(`${server.url}/pets/1`)).statusCode).toBe(204);
    expect(server.records[1]!.quota).toBe('shadow_refused');
    expect(server.records[1]!.refusedBy).toBe(`${systemQuotaId}/0`);
    expect(server.verdicts).toEqual([true, true]);
  });

  it('answers 413 to a declared body larger than a whole window of a byte restriction, naming it', async () => {
    const server = await serve([megabytes('0.00001')]);
    const { statusCode, body } = await request(`${server.url}/pets/1`, {
      method: 'PUT',
      body: 'x'.repeat(100),
    });
    expect(statusCode).toBe(413);
    expect(((await body.json()) as { message: string }).message).toContain(`restriction ${systemQuotaId}/0`);
    expect(server.verdicts).toEqual([false]);
  });

  it('keeps the byte restrictions that admitted a request, for the charges at its end', async () => {
    const server = await serve([megabytes('1')]);
    await request(`${server.url}/pets/1`, { method: 'PUT', body: 'x'.repeat(100) });
    const record = server.records[0]!;
    expect(record.declaredBytes).toBe(100);
    expect(record.byteCounters.map((restriction) => restriction.type)).toEqual(['throttlemb']);
  });
});
