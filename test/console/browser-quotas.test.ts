import { describe, expect, it } from 'vitest';
import {
  api,
  choose,
  logIn,
  mobile,
  quotas,
  screenshot,
  useConsoleBrowser,
  waitForText,
} from '../helpers/browser.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  basicAuth,
  devKey,
  getPetMethodId,
  petsApiId,
  setQuota,
  systemQuotaId,
  throttle,
} from '../helpers/test-gateway.js';

/**
 * The admin console in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core), over a
 * real gateway and upstream: what a person sees and does, through the page's own login session.
 * Every test also checks that the browser refused nothing the page tried (Content-Security-Policy).
 */
const { start, page } = useConsoleBrowser();

describe('the admin console in a browser', () => {
  it('logs an administrator in and shows the quotas in words, the well-known ones without Delete', async () => {
    const gateway = await start();
    await setQuota(
      gateway,
      {
        type: 'API',
        name: 'System',
        restrictions: [{ ...throttle(100, 1, 'minute'), api: petsApiId, method: getPetMethodId }],
      },
      systemQuotaId,
    );
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    const system = await waitForText(browserPage, `article[data-quota="${systemQuotaId}"]`, 'System');
    expect(system).toContain('100 messages per 1 minute on Pet Store › getPet');
    expect(await browserPage.$(`article[data-quota="${systemQuotaId}"] [data-action=delete]`)).toBeNull();
    expect(await browserPage.$('a[href="#/quotas/new"]')).not.toBeNull();
    await screenshot(browserPage, 'quotas');
  });

  it('creates a quota through the form, edits it with If-Match, and deletes it', async () => {
    const gateway = await start();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await (await browserPage.waitForSelector('a[href="#/quotas/new"]'))!.click();
    await browserPage.waitForSelector('form.quota-form');
    await browserPage.type('input[name=name]', 'Pet reads');
    await choose(browserPage, 'select[name="restrictions[0].api"]', 'Pet Store');
    await choose(browserPage, 'select[name="restrictions[0].method"]', 'getPet');
    await browserPage.type('input[name="restrictions[0].config.amount"]', '5');
    await browserPage.select('select[name="restrictions[0].config.period"]', 'hour');
    // Every choice of a restriction shows whole: each select is wide enough for its longest label.
    const cutOff = await browserPage.$$eval('fieldset.restriction select', (selects) =>
      selects.flatMap((select) => {
        const style = getComputedStyle(select);
        const context = document.createElement('canvas').getContext('2d')!;
        context.font = `${style.fontSize} ${style.fontFamily}`;
        // What the text has: the box less its padding and the arrow (about 1.5em).
        const room =
          select.clientWidth -
          parseFloat(style.paddingLeft) -
          parseFloat(style.paddingRight) -
          1.5 * parseFloat(style.fontSize);
        return [...select.options]
          .filter((option) => context.measureText(option.text).width > room)
          .map((option) => option.text);
      }),
    );
    expect(cutOff).toEqual([]);
    await screenshot(browserPage, 'quota-new');
    await browserPage.click('form.quota-form button[type=submit]');
    await browserPage.waitForFunction(() => /^#\/quotas\/[0-9a-f-]{36}$/.test(location.hash));
    const created = (await quotas(gateway)).find((quota) => quota.name === 'Pet reads');
    expect(created?.restrictions).toEqual([
      {
        api: petsApiId,
        method: getPetMethodId,
        type: 'throttle',
        config: { messages: '5', per: '1', period: 'hour' },
      },
    ]);

    await browserPage.waitForSelector('input[name="restrictions[0].config.amount"]');
    await browserPage.$eval('input[name="restrictions[0].config.amount"]', (input) => {
      (input as HTMLInputElement).value = '';
    });
    await browserPage.type('input[name="restrictions[0].config.amount"]', '7');
    // In shadow: counted, never refusing; the list says so beside the restriction.
    await browserPage.click('input[name="restrictions[0].mode"]');
    // Counted per client address.
    await browserPage.type('input[name="restrictions[0].by"]', 'client');
    await browserPage.click('form.quota-form button[type=submit]');
    await waitForText(browserPage, '.notice', 'Saved "Pet reads"');
    const edited = (await quotas(gateway)).find((quota) => quota.id === created!.id);
    expect(edited?.restrictions[0]).toMatchObject({
      mode: 'shadow',
      by: 'client',
      config: { messages: '7' },
    });

    // Deleted from the list, after the browser's confirmation.
    await browserPage.goto(`${gateway.adminUrl}/#/quotas`);
    const listed = await waitForText(browserPage, `article[data-quota="${created!.id}"] li`, '7 messages');
    expect(listed).toContain('shadow');
    expect(listed).toContain('per client address');
    const confirmed = new Promise<string>((resolve) =>
      browserPage.once('dialog', (dialog) => {
        resolve(dialog.message());
        void dialog.accept();
      }),
    );
    await (await browserPage.waitForSelector(
      `article[data-quota="${created!.id}"] [data-action=delete]`,
    ))!.click();
    expect(await confirmed).toContain('Delete the quota "Pet reads"?');
    await waitForText(browserPage, '.notice', 'Deleted "Pet reads".');
    expect((await quotas(gateway)).some((quota) => quota.id === created!.id)).toBe(false);
    expect(await browserPage.$(`article[data-quota="${created!.id}"]`)).toBeNull();
  });

  it('creates a concurrency restriction, which has no window, and edits its number of requests in flight', async () => {
    const gateway = await start();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/quotas/new`);
    await browserPage.waitForSelector('form.quota-form');
    await browserPage.type('input[name=name]', 'Pet streams');
    await choose(browserPage, 'select[name="restrictions[0].type"]', 'In flight');
    // No window to choose: the fields of one are gone.
    await browserPage.waitForFunction(
      () => document.querySelector('select[name="restrictions[0].config.period"]') === null,
    );
    expect(await browserPage.$('input[name="restrictions[0].config.per"]')).toBeNull();
    expect(
      await browserPage.$eval('fieldset.restriction label.f-amount', (label) => label.textContent),
    ).toContain('Requests at once');
    await browserPage.type('input[name="restrictions[0].config.amount"]', '3');
    await screenshot(browserPage, 'quota-concurrency');
    await browserPage.click('form.quota-form button[type=submit]');
    await browserPage.waitForFunction(() => /^#\/quotas\/[0-9a-f-]{36}$/.test(location.hash));
    const created = (await quotas(gateway)).find((quota) => quota.name === 'Pet streams');
    expect(created?.restrictions).toEqual([
      { api: '*', method: '*', type: 'concurrency', config: { connections: '3' } },
    ]);

    // The form opens with what was stored, and saves the new number.
    const amount = await browserPage.waitForSelector('input[name="restrictions[0].config.amount"]');
    expect(await amount!.evaluate((input) => (input as HTMLInputElement).value)).toBe('3');
    await amount!.evaluate((input) => {
      (input as HTMLInputElement).value = '';
    });
    await browserPage.type('input[name="restrictions[0].config.amount"]', '5');
    await browserPage.click('form.quota-form button[type=submit]');
    await waitForText(browserPage, '.notice', 'Saved "Pet streams"');
    const edited = (await quotas(gateway)).find((quota) => quota.id === created!.id);
    expect(edited?.restrictions).toEqual([
      { api: '*', method: '*', type: 'concurrency', config: { connections: '5' } },
    ]);
    await browserPage.goto(`${gateway.adminUrl}/#/quotas`);
    await waitForText(browserPage, `article[data-quota="${created!.id}"] li`, '5 requests in flight at once');
  });

  it('creates a restriction on tokens that an LLM API says in its answer body', async () => {
    const gateway = await start();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/quotas/new`);
    await browserPage.waitForSelector('form.quota-form');
    await browserPage.type('input[name=name]', 'Tokens');
    await choose(browserPage, 'select[name="restrictions[0].type"]', 'Units');
    await browserPage.type('input[name="restrictions[0].config.amount"]', '100000');
    await browserPage.type(
      'input[name="restrictions[0].config.body"]',
      'message.usage.input_tokens, usage.output_tokens',
    );
    await browserPage.type('input[name="restrictions[0].config.fallback"]', '500');
    await screenshot(browserPage, 'quota-llm-tokens');
    await browserPage.click('form.quota-form button[type=submit]');
    await browserPage.waitForFunction(() => /^#\/quotas\/[0-9a-f-]{36}$/.test(location.hash));
    const created = (await quotas(gateway)).find((quota) => quota.name === 'Tokens');
    expect(created?.restrictions).toEqual([
      {
        api: '*',
        method: '*',
        type: 'throttleunits',
        config: {
          units: '100000',
          per: '1',
          period: 'minute',
          body: ['message.usage.input_tokens', 'usage.output_tokens'],
          default: '500',
        },
      },
    ]);
    const body = await browserPage.waitForSelector('input[name="restrictions[0].config.body"]');
    expect(await body!.evaluate((input) => (input as HTMLInputElement).value)).toBe(
      'message.usage.input_tokens, usage.output_tokens',
    );
    await browserPage.goto(`${gateway.adminUrl}/#/quotas`);
    await waitForText(
      browserPage,
      `article[data-quota="${created!.id}"] li`,
      '100,000 units (message.usage.input_tokens + usage.output_tokens) per 1 minute',
    );
  });

  it("shows the admin API's message next to a bad limit, and creates nothing", async () => {
    const gateway = await start();
    const before = (await quotas(gateway)).length;
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/quotas/new`);
    await browserPage.waitForSelector('form.quota-form');
    await browserPage.type('input[name=name]', 'Too small');
    await browserPage.type('input[name="restrictions[0].config.amount"]', '0');
    await browserPage.click('form.quota-form button[type=submit]');
    const message = await waitForText(
      browserPage,
      '[data-error-for="restrictions[0].config.amount"]',
      'must be a whole number from 1 to 1000000000000',
    );
    expect(message).toBe('must be a whole number from 1 to 1000000000000');
    await screenshot(browserPage, 'quota-validation');
    expect((await quotas(gateway)).length).toBe(before);
  });

  it('never overwrites a change someone else saved first', async () => {
    const gateway = await start();
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(10, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/quotas/${applicationDefaultQuotaId}`);
    await browserPage.waitForSelector('form.quota-form');
    const amount = 'input[name="restrictions[0].config.amount"]';
    const amountError = `[data-error-for="restrictions[0].config.amount"]`;
    const enter = async (text: string) => {
      await browserPage.click(amount, { count: 3 });
      await browserPage.type(amount, text);
      await browserPage.click('form.quota-form button[type=submit]');
    };
    // A first try the API refuses leaves its message next to the field.
    await enter('0');
    await waitForText(browserPage, amountError, 'must be a whole number');
    // Meanwhile, someone else changes the quota.
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Changed elsewhere', restrictions: [throttle(3, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    await enter('100');
    await waitForText(browserPage, '.form-errors', 'Someone else changed this quota');
    // The conflict is the one thing said: the message of the first try is gone.
    expect(await browserPage.$eval(amountError, (element) => element.textContent)).toBe('');
    const current = (await quotas(gateway)).find((quota) => quota.id === applicationDefaultQuotaId);
    expect(current?.name).toBe('Changed elsewhere');
    expect(current?.restrictions[0]?.config.messages).toBe('3');
  });

  it('shows usage bars that move with the traffic, and rejections on the sparkline', async () => {
    const gateway = await start({ applications: [mobile] });
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(4, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/usage`);
    await waitForText(
      browserPage,
      `article[data-quota="${applicationDefaultQuotaId}"]`,
      'No application has used it',
    );
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) {
      const res = await fetch(`${gateway.url}/pets/1`, {
        headers: { authorization: basicAuth(mobile.apikey_development) },
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    // The page refreshes by itself: the bar of the application fills, the sparkline counts the 429s.
    const bar = await browserPage.waitForSelector(
      `article[data-quota="${applicationDefaultQuotaId}"] qg-usage-bar[data-used="4"][data-level="full"]`,
    );
    expect(await bar!.evaluate((element) => element.textContent)).toContain('Mobile app');
    await browserPage.waitForSelector(
      `article[data-quota="${applicationDefaultQuotaId}"] qg-sparkline[data-total="2"]`,
    );
    await screenshot(browserPage, 'usage');

    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    const card = await waitForText(browserPage, `article[data-application="${mobile.id}"]`, 'Mobile app');
    expect(card).toContain('No quota of its own: the Application Default applies.');
    await browserPage.waitForSelector(`article[data-application="${mobile.id}"] qg-usage-bar[data-used="4"]`);
    await screenshot(browserPage, 'applications');
  });

  it('shows a restriction counted by caller with whose count it keeps, and the busiest caller of those counted', async () => {
    const gateway = await start({ trustProxy: ['127.0.0.1'] });
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(3, 1, 'minute', { by: 'header:X-Tenant' })] },
      systemQuotaId,
    );
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    const listed = await waitForText(browserPage, `article[data-quota="${systemQuotaId}"] li`, '3 messages');
    expect(listed).toContain('every API, per value of x-tenant');
    await browserPage.goto(`${gateway.adminUrl}/#/usage`);
    const usage = `article[data-quota="${systemQuotaId}"]`;
    await waitForText(browserPage, usage, 'no caller counted yet');
    for (const tenant of ['acme', 'acme', 'globex']) {
      const res = await fetch(`${gateway.url}/pets/1`, {
        headers: { authorization: basicAuth(devKey), 'x-tenant': tenant },
      });
      await res.arrayBuffer();
      expect(res.status).toBe(200);
    }
    // The page refreshes by itself: the bar is the busiest caller's (acme, 2 of 3), of the 2 counted.
    const bar = await browserPage.waitForSelector(`${usage} qg-usage-bar[data-used="2"]`);
    expect(await bar!.evaluate((element) => element.textContent)).toContain(
      'the busiest of 2 callers counted',
    );
    expect(await waitForText(browserPage, usage, 'per value of x-tenant')).toContain('System');
  });

  it('shows names and descriptions as text, never as markup: a hostile quota or application name runs nothing', async () => {
    const hostile = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>&amp; "'`;
    const gateway = await start({ applications: [{ ...mobile, name: `${hostile} app` }] });
    const created = await api(gateway, '/quotas', {
      method: 'POST',
      body: JSON.stringify({ type: 'API', name: hostile, description: hostile, restrictions: [] }),
    });
    expect(created.status).toBe(201);
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await waitForText(browserPage, 'main', hostile);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    await waitForText(browserPage, 'main', `${hostile} app`);
    await browserPage.goto(`${gateway.adminUrl}/#/usage`);
    await waitForText(browserPage, 'main', hostile);
    expect(await browserPage.evaluate(() => (window as { pwned?: number }).pwned)).toBeUndefined();
    expect(await browserPage.$('main img, main script')).toBeNull();
  });

  it('shows the tab chosen last when the data of the tab before it comes later', async () => {
    const gateway = await start({ applications: [mobile] });
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/docs`);
    await browserPage.waitForSelector('main h2');
    // The Quotas tab's quota list is held at the browser until the Applications tab has been drawn (which
    // reads the list too, for its plans: that later request goes through).
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let heldRequest: unknown = null;
    await browserPage.setRequestInterception(true);
    browserPage.on('request', (request) => {
      if (heldRequest === null && request.url().endsWith('/api/portal/v1.3/quotas')) {
        heldRequest = request;
        void held.then(() => request.continue());
      } else void request.continue();
    });
    await browserPage.evaluate(() => (location.hash = '#/quotas'));
    await browserPage.evaluate(() => (location.hash = '#/applications'));
    await browserPage.waitForSelector(`article[data-application="${mobile.id}"]`);
    const listed = browserPage.waitForResponse((response) => response.request() === heldRequest);
    release();
    await listed;
    // Two frames for the late answer to be parsed and drawn, had it anywhere to go.
    await browserPage.evaluate(
      () => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))),
    );
    expect(await browserPage.$(`article[data-application="${mobile.id}"]`)).not.toBeNull();
    expect(await browserPage.$('article[data-quota]')).toBeNull();
  });
});
