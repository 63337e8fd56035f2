import { describe, expect, it } from 'vitest';
import { api, logIn, screenshot, useConsoleBrowser, waitForText } from '../helpers/browser.js';
import { startTestIdentityProvider } from '../helpers/jwks-server.js';
import { adminUser, throttle } from '../helpers/test-gateway.js';

/**
 * The Applications tab of a gateway whose callers carry a JWT, tried as a new user would: nobody
 * declares those applications, so the tab shows the ones the gateway knows, and says where the others
 * come from.
 */
const { defer, start, page } = useConsoleBrowser();

describe('the Applications tab with APIKeyAuthType jwt', () => {
  it('says, while it knows no caller, that jwt callers appear once they have a quota or are counted', async () => {
    const idp = await startTestIdentityProvider(defer);
    const gateway = await start({ APIKeyAuthType: 'jwt', jwt: idp.jwt });
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    const empty = await waitForText(browserPage, '.application-list .empty', 'jwt');
    expect(empty).toContain('applicationClaim');
  });

  it('shows a caller that has a quota of its own, as a jwt caller, with its quota', async () => {
    const idp = await startTestIdentityProvider(defer);
    const gateway = await start({ APIKeyAuthType: 'jwt', jwt: idp.jwt });
    const own = await api(gateway, '/applications/partner-c/quota', {
      method: 'POST',
      body: JSON.stringify({ restrictions: [throttle(5, 1, 'minute')] }),
    });
    expect(own.status).toBe(201);
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    const card = await waitForText(browserPage, 'article[data-application="partner-c"]', 'Its own quota');
    expect(card).toContain('jwt caller');
    expect(card).toContain('5 messages per 1 minute');
    await screenshot(browserPage, 'applications-jwt');
  });
});
