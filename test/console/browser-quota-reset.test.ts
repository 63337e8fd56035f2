import type { Page } from 'puppeteer-core';
import { describe, expect, it } from 'vitest';
import { logIn, mobile, useConsoleBrowser, waitForText } from '../helpers/browser.js';
import { request } from '../helpers/raw-http.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  basicAuth,
  memberUser,
  setQuota,
  throttle,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * The Applications tab's "Reset quota", in a real headless Chromium over a real gateway: asked first,
 * the admin API's 204 shown, and the application's next request admitted with the whole limit again.
 */
const { start, page } = useConsoleBrowser();

const call = async (gateway: TestGateway) =>
  (
    await request(gateway.url, {
      path: '/pets/1',
      headers: { authorization: basicAuth(mobile.apikey_development) },
    })
  ).status;

/** A gateway where the mobile application has spent the Application Default's 2 calls an hour. */
async function spentGateway(): Promise<TestGateway> {
  const gateway = await start({ applications: [mobile] });
  await setQuota(
    gateway,
    { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(2, 1, 'hour')] },
    applicationDefaultQuotaId,
  );
  expect([await call(gateway), await call(gateway), await call(gateway)]).toEqual([200, 200, 429]);
  return gateway;
}

/** Clicks the mobile application's Reset quota and answers its question; resolves to the question. */
async function clickReset(browserPage: Page, accept: boolean): Promise<string> {
  const button = await browserPage.waitForSelector(
    `article[data-application="${mobile.id}"] [data-action=reset-quota]`,
  );
  const asked = new Promise<string>((resolve) => {
    browserPage.once('dialog', (dialog) => {
      resolve(dialog.message());
      void (accept ? dialog.accept() : dialog.dismiss());
    });
  });
  await button!.click();
  return asked;
}

describe('resetting a quota from the console', () => {
  it('asks first, then shows the 204, and the application has its whole limit again', async () => {
    const gateway = await spentGateway();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);

    // Dismissed, nothing is reset.
    expect(await clickReset(browserPage, false)).toBe(
      `Reset the quota of "${mobile.name}"? Every counter of "Application Default" that counts it starts again from zero, on every gateway: its next request has the whole limit.`,
    );
    expect(await call(gateway)).toBe(429);

    await clickReset(browserPage, true);
    await waitForText(browserPage, '.notice.done', `The quota of "${mobile.name}" was reset (204)`);
    expect([await call(gateway), await call(gateway), await call(gateway)]).toEqual([200, 200, 429]);
  });

  it('offers a member no reset', async () => {
    const gateway = await spentGateway();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, memberUser);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    await browserPage.waitForSelector(`article[data-application="${mobile.id}"] .restriction-usage`);
    expect(await browserPage.$('[data-action=reset-quota]')).toBeNull();
  });
});
