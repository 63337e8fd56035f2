import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { account } from '../../../src/gateway/steps/account.js';
import { route } from '../../../src/gateway/steps/route.js';
import { answeringAuthenticator, recordServer, stepContext, stepRuleSet } from '../../helpers/step-parts.js';

describe('the account step', () => {
  let close: () => Promise<void> = () => Promise.resolve();
  afterEach(() => close());

  it('ends an exchange once however often it is told: one request less in flight, its rule set left once', async () => {
    const parts = stepContext();
    let closes = 0;
    const { authenticator } = answeringAuthenticator({ ok: true, principal: null });
    authenticator.close = () => {
      closes += 1;
      return Promise.resolve();
    };
    const ruleSet = stepRuleSet(authenticator);
    const server = await recordServer(ruleSet, (record) => {
      route(parts.context, record);
      record.res.once('close', () => {
        account(parts.context, record);
        account(parts.context, record);
      });
    });
    close = server.close;
    ruleSet.enter();
    expect((await request(`${server.url}/nowhere`)).statusCode).toBe(404);
    await new Promise((resolve) => setImmediate(resolve));
    expect(parts.finished()).toBe(1);
    expect(server.records[0]!.accounted).toBe(true);
    // The rule set had one more request in it (entered above): retiring it closes it only if the record left.
    ruleSet.leave();
    ruleSet.retire();
    await new Promise((resolve) => setImmediate(resolve));
    expect(closes).toBe(1);
  });

  it('counts the request in the metrics by its API, method and status', async () => {
    const parts = stepContext();
    const { authenticator } = answeringAuthenticator({ ok: true, principal: null });
    const server = await recordServer(stepRuleSet(authenticator), (record) => {
      route(parts.context, record);
      record.res.once('close', () => account(parts.context, record));
    });
    close = server.close;
    await request(`${server.url}/pets/1`, { method: 'DELETE' });
    await new Promise((resolve) => setImmediate(resolve));
    const text = await parts.metrics.registry.metrics();
    expect(text).toMatch(/api="Pets"[^\n]*status="405"|status="405"[^\n]*api="Pets"/);
  });
});
