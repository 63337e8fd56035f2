import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { Page } from 'puppeteer-core';
import {
  api,
  logIn,
  mobile,
  openPage,
  otherSite,
  screenshot,
  type Quota,
  useConsoleBrowser,
  waitForText,
} from '../helpers/browser.js';
import {
  adminUser,
  applicationDefaultQuotaId,
  memberUser,
  setQuota,
  systemQuotaId,
  throttle,
} from '../helpers/test-gateway.js';
import { startTestIdentityProvider } from '../helpers/jwks-server.js';

/**
 * The admin console in a real headless Chromium (Debian's `chromium`, driven by puppeteer-core), over a
 * real gateway and upstream: what a person sees and does, through the page's own login session.
 * Every test also checks that the browser refused nothing the page tried (Content-Security-Policy).
 */
const secret = 'a-long-shared-secret-0123456789';

const { browser, defer, start, page } = useConsoleBrowser();

/** Puts the mobile application back on the Application Default from the Applications tab. */
async function backToTheDefault(browserPage: Page, adminUrl: string): Promise<void> {
  await browserPage.goto(`${adminUrl}/#/applications`);
  browserPage.once('dialog', (dialog) => void dialog.accept());
  await (await browserPage.waitForSelector(
    `article[data-application="${mobile.id}"] [data-action=default-quota]`,
  ))!.click();
  await waitForText(browserPage, '.notice', '"Mobile app" is on the Application Default again.');
}

describe('the admin console in a browser', () => {
  it('gives an application a quota of its own from the Applications tab, and takes it back', async () => {
    const gateway = await start({ applications: [mobile] });
    await setQuota(
      gateway,
      { type: 'APPLICATION', name: 'Application Default', restrictions: [throttle(4, 1, 'minute')] },
      applicationDefaultQuotaId,
    );
    const ownQuota = async () =>
      (await (await api(gateway, `/applications/${mobile.id}/quota`)).json()) as Quota;
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    await (await browserPage.waitForSelector(
      `article[data-application="${mobile.id}"] [data-action=own-quota]`,
    ))!.click();
    await browserPage.waitForFunction(() => /^#\/quotas\/[0-9a-f-]{36}$/.test(location.hash));
    const own = await ownQuota();
    expect(own.id).not.toBe(applicationDefaultQuotaId);
    expect(own.name).toBe('Mobile app quota');
    expect(own.restrictions[0]?.config.messages).toBe('4');
    await waitForText(browserPage, 'h2', 'Edit “Mobile app quota”');

    await backToTheDefault(browserPage, gateway.adminUrl);
    expect((await ownQuota()).id).toBe(applicationDefaultQuotaId);
    await browserPage.waitForSelector(`article[data-application="${mobile.id}"] [data-action=own-quota]`);
  });

  it('puts an application on a plan from the Applications tab, shows the plan with its members, and takes it off', async () => {
    const gateway = await start({ applications: [mobile] });
    const goldId = await setQuota(gateway, {
      type: 'APPLICATION',
      name: 'Gold',
      restrictions: [throttle(9, 1, 'minute')],
    });
    const quotaOfMobile = async () =>
      (await (await api(gateway, `/applications/${mobile.id}/quota`)).json()) as Quota & {
        plan?: { id: string };
      };
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/applications`);
    const choice = `article[data-application="${mobile.id}"] select[data-action=plan]`;
    await browserPage.waitForSelector(choice);
    await browserPage.select(choice, goldId);
    await waitForText(browserPage, '.notice', '"Mobile app" is on the plan "Gold".');
    expect((await quotaOfMobile()).plan?.id).toBe(goldId);
    await waitForText(browserPage, `article[data-application="${mobile.id}"] p`, 'On the plan Gold.');

    await browserPage.goto(`${gateway.adminUrl}/#/quotas`);
    await browserPage.waitForSelector(`article[data-quota="${goldId}"] [data-plan-members="1"]`);

    await backToTheDefault(browserPage, gateway.adminUrl);
    expect((await quotaOfMobile()).id).toBe(applicationDefaultQuotaId);
  });

  it('shows a quota declared in conf/ read-only, and says where to change it', async () => {
    const gateway = await start({
      quotas: [
        { id: systemQuotaId, type: 'API', name: 'System', restrictions: [throttle(100, 1, 'minute')] },
      ],
    });
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    const card = await waitForText(browserPage, `article[data-quota="${systemQuotaId}"]`, 'conf/');
    expect(card).toContain('View');
    expect(card).not.toContain('Edit');
    await (await browserPage.waitForSelector(`article[data-quota="${systemQuotaId}"] a.button`))!.click();
    await waitForText(browserPage, '.note', 'declared in conf/ (quotas): change it there');
    expect(await browserPage.$('form.quota-form button[type=submit]')).toBeNull();
  });

  it('"try it" sends the request with the plugin\'s credentials: 200, and the secret never reaches the page', async () => {
    const gateway = await start({
      APIKeyAuthType: 'plugin',
      APIKeyAuthPlugin: './examples/plugins/x-secret.js',
      secret,
    });
    // Without the plugin's credentials the data plane refuses.
    expect((await fetch(`${gateway.url}/pets/1`)).status).toBe(401);
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/docs`);
    await browserPage.waitForSelector('details[data-operation=getPet] summary');
    await browserPage.click('details[data-operation=getPet] summary');
    await browserPage.waitForSelector('details[data-operation=getPet] input[name=param-petId]');
    await browserPage.type('details[data-operation=getPet] input[name=param-petId]', '42');
    await browserPage.click('details[data-operation=getPet] button[type=submit]');
    const answer = await browserPage.waitForSelector('details[data-operation=getPet] .try-answer');
    expect(await answer!.evaluate((element) => element.getAttribute('data-status'))).toBe('200');
    expect(await answer!.evaluate((element) => element.textContent)).toContain('"url": "/pets/42"');
    expect(await browserPage.content()).not.toContain(secret);
    await screenshot(browserPage, 'try-it');
  });

  it('"try it" sends the bearer token entered with the jwt scheme: 200, and the token is kept nowhere', async () => {
    const idp = await startTestIdentityProvider(defer);
    const gateway = await start({ APIKeyAuthType: 'jwt', jwt: idp.jwt });
    const token = await idp.token();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.goto(`${gateway.adminUrl}/#/docs`);
    await browserPage.waitForSelector('details[data-operation=getPet] summary');
    await browserPage.click('details[data-operation=getPet] summary');
    const form = 'details[data-operation=getPet] form.try-form';
    await waitForText(browserPage, form, 'Paste a bearer token from the identity provider');
    await browserPage.type(`${form} input[name=param-petId]`, '42');
    // Pasted, as a token is: typing its 800 characters one by one proves nothing more.
    await browserPage.$eval(
      `${form} input[name=token]`,
      (input, value) => {
        (input as HTMLInputElement).value = value;
      },
      token,
    );
    await browserPage.click(`${form} button[type=submit]`);
    const answer = await browserPage.waitForSelector(`${form} .try-answer`);
    expect(await answer!.evaluate((element) => element.getAttribute('data-status'))).toBe('200');
    expect(await browserPage.$eval(`${form} input[name=token]`, (input) => input.getAttribute('type'))).toBe(
      'password',
    );
    expect(await browserPage.content()).not.toContain(token);
    const stored = await browserPage.evaluate(() =>
      JSON.stringify([{ ...localStorage }, { ...sessionStorage }, document.cookie]),
    );
    expect(stored).not.toContain(token);
    expect(gateway.rawLogs()).not.toContain(token);
    await screenshot(browserPage, 'try-it-jwt');
  });

  it('lets a member look but not change, and never shows them the System quota', async () => {
    const gateway = await start();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, memberUser);
    await browserPage.waitForSelector(`article[data-quota="${applicationDefaultQuotaId}"]`);
    expect(await browserPage.$(`article[data-quota="${systemQuotaId}"]`)).toBeNull();
    expect(await browserPage.$('a[href="#/quotas/new"]')).toBeNull();
    expect(await browserPage.$('[data-action=delete]')).toBeNull();

    await browserPage.click(`article[data-quota="${applicationDefaultQuotaId}"] a.button`);
    await waitForText(browserPage, '.note', 'only an API Administrator can change it');
    expect(await browserPage.$('form.quota-form button[type=submit]')).toBeNull();
    expect(await browserPage.$eval('input[name=name]', (input) => (input as HTMLInputElement).disabled)).toBe(
      true,
    );
    await screenshot(browserPage, 'member');

    // The member's own session, used directly, is refused the change too.
    const refused = await browserPage.evaluate(async (id) => {
      const me = await fetch('/api/portal/v1.3/currentuser');
      const res = await fetch(`/api/portal/v1.3/quotas/${id}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', 'csrf-token': me.headers.get('csrf-token') ?? '' },
        body: JSON.stringify({ type: 'APPLICATION', name: 'Mine', restrictions: [] }),
      });
      return { status: res.status, text: await res.text() };
    }, applicationDefaultQuotaId);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('only an API Administrator may do this');
  });

  it('cannot be logged in by a page of another site (login CSRF)', async () => {
    const gateway = await start();
    const attacker = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<form id="f" method="POST" action="${gateway.adminUrl}/api/portal/v1.3/login">` +
          `<input name="username" value="${memberUser.username}"><input name="password" value="${memberUser.password}">` +
          `</form><script>document.getElementById('f').submit()</script>`,
      );
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise<void>((resolve) => attacker.close(() => resolve())));
    const browserPage = await page();
    const answered = browserPage.waitForResponse((response) => response.url().endsWith('/login'));
    await browserPage.goto(`http://${otherSite}:${(attacker.address() as AddressInfo).port}/`);
    expect((await answered).status()).toBe(403);
    const cookies = await browserPage.browserContext().cookies();
    expect(cookies.map((cookie) => cookie.name)).not.toContain('APIMANAGERSESSION');
    await browserPage.goto(`${gateway.adminUrl}/`);
    await browserPage.waitForSelector('form.login');
  });

  it('cannot be framed by a page of another site (clickjacking): the frame stays empty', async () => {
    const gateway = await start();
    const attacker = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<iframe id="victim" src="${gateway.adminUrl}/" width="800" height="600"></iframe>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    defer(() => new Promise<void>((resolve) => attacker.close(() => resolve())));
    // Not page(): the one thing this page's browser refuses is the point of the test.
    const { page: browserPage, problems } = await openPage(browser());
    defer(() => browserPage.browserContext().close());
    await logIn(browserPage, gateway.adminUrl, adminUser);
    const framed = browserPage.waitForResponse((response) => response.url() === `${gateway.adminUrl}/`);
    await browserPage.goto(`http://${otherSite}:${(attacker.address() as AddressInfo).port}/`, {
      waitUntil: 'load',
    });
    expect((await framed).status()).toBe(200);
    const frame = browserPage.frames().find((candidate) => candidate !== browserPage.mainFrame());
    expect(frame, 'the attacker page has its frame').toBeDefined();
    expect(frame!.url()).not.toBe(`${gateway.adminUrl}/`);
    expect(await frame!.$$('form, article, header')).toHaveLength(0);
    expect(problems).toEqual([expect.stringMatching(/^CSP: Framing .* violates .*frame-ancestors 'none'/s)]);
  });

  it("asks for the login again when the session ends, without the browser's own password dialog", async () => {
    const gateway = await start();
    const browserPage = await page();
    await logIn(browserPage, gateway.adminUrl, adminUser);
    await browserPage.waitForSelector('article.quota');
    const challenge = await browserPage.evaluate(async () => {
      const res = await fetch('/api/portal/v1.3/quotas', { credentials: 'omit' });
      return { status: res.status, challenge: res.headers.get('www-authenticate') };
    });
    expect(challenge).toEqual({ status: 401, challenge: null });
    await browserPage.click('header.top .who button');
    await browserPage.waitForSelector('form.login');
    await browserPage.goto(`${gateway.adminUrl}/#/usage`);
    await browserPage.waitForSelector('form.login');
  });
});
