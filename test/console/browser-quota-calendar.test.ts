import { describe, expect, it } from 'vitest';
import { logIn, quotas, screenshot, useConsoleBrowser, waitForText } from '../helpers/browser.js';
import { adminUser } from '../helpers/test-gateway.js';

/** The quota form's calendar windows, in a real headless Chromium over a real gateway. */
const { start, page } = useConsoleBrowser();

describe('calendar windows in the console', () => {
  it('creates a calendar month from a billing day in a time zone, and shows it in words', async () => {
    const gateway = await start();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/quotas/new`);
    await browserPage.waitForSelector('form.quota-form');
    await browserPage.type('input[name=name]', 'Monthly');
    await browserPage.type('input[name="restrictions[0].config.amount"]', '1000000');
    await browserPage.select('select[name="restrictions[0].config.period"]', 'month');
    // The time zone and billing day show once the window is a calendar one.
    expect(await browserPage.$('input[name="restrictions[0].config.timeZone"]')).toBeNull();
    await browserPage.select('select[name="restrictions[0].config.window"]', 'calendar');
    const timeZone = await browserPage.waitForSelector('input[name="restrictions[0].config.timeZone"]');
    await timeZone!.type('Europe/Berlin');
    await browserPage.type('input[name="restrictions[0].config.startDay"]', '15');
    await screenshot(browserPage, 'quota-calendar-month');
    await browserPage.click('form.quota-form button[type=submit]');
    await browserPage.waitForFunction(() => /^#\/quotas\/[0-9a-f-]{36}$/.test(location.hash));
    const created = (await quotas(gateway)).find((quota) => quota.name === 'Monthly');
    expect(created?.restrictions).toEqual([
      {
        api: '*',
        method: '*',
        type: 'throttle',
        config: {
          messages: '1000000',
          per: '1',
          period: 'month',
          window: 'calendar',
          timeZone: 'Europe/Berlin',
          startDay: 15,
        },
      },
    ]);
    // Edited again, the form shows what the quota says.
    const zone = await browserPage.waitForSelector('input[name="restrictions[0].config.timeZone"]');
    expect(await zone!.evaluate((input) => (input as HTMLInputElement).value)).toBe('Europe/Berlin');
    await browserPage.goto(`${gateway.adminUrl}/#/quotas`);
    await waitForText(
      browserPage,
      `article[data-quota="${created!.id}"] li`,
      '1,000,000 messages per calendar month from the 15th (Europe/Berlin)',
    );
  });
});
