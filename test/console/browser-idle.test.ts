import { describe, expect, it } from 'vitest';
import { logIn, screenshot, useConsoleBrowser, waitForText } from '../helpers/browser.js';
import { adminUser } from '../helpers/test-gateway.js';

/**
 * The console as a screenshot recipe or a synthetic monitor drives it: a headless browser that waits
 * for `networkidle0` (no request open for 500 ms) before it looks. A request the page leaves open
 * forever would hang every such tool.
 */
const { start, page } = useConsoleBrowser();

/** Each tab, by its hash, and a text it shows once drawn. */
const tabs = [
  ['#/quotas', 'Application Default'],
  ['#/usage', 'Live usage'],
  ['#/history', 'History'],
  ['#/applications', 'Applications'],
  ['#/docs', 'Pet Store'],
] as const;

describe('the admin console, waited on for network idle', () => {
  it('reaches network idle on its login page, and on every tab loaded afresh with a session', async () => {
    const gateway = await start();
    const browserPage = await page();
    await browserPage.goto(`${gateway.adminUrl}/`, { waitUntil: 'networkidle0' });
    expect(await browserPage.$('form.login')).not.toBeNull();

    await logIn(browserPage, gateway.adminUrl, adminUser);
    for (const [hash, shown] of tabs) {
      await browserPage.evaluate((next) => {
        location.hash = next;
      }, hash);
      await browserPage.reload({ waitUntil: 'networkidle0' });
      await waitForText(browserPage, 'main', shown);
    }
    await screenshot(browserPage, 'idle-docs');
  });
});
