import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { cleanupAfterEach } from './cleanups.js';
import {
  adminUser,
  petsConfig,
  startGatewayOverUpstream,
  userAuth,
  type TestGateway,
} from './test-gateway.js';

/** Where the browser tests leave their screenshots (not committed: see .gitignore). */
export const screenshotDir = path.resolve('test-output/screenshots');

/** Debian's `chromium` (what .ci/run installs), or the browser CHROMIUM_PATH names. */
export function chromiumPath(): string {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
  const found = candidates.find((candidate) => candidate && existsSync(candidate));
  if (!found) {
    throw new Error(
      "no Chromium: install Debian's chromium package (apt-get install -y chromium) or set CHROMIUM_PATH",
    );
  }
  return found;
}

/** A host name the browser resolves to 127.0.0.1: a page on it is "another site" to the console. */
export const otherSite = 'other-site.test';

/** A headless Chromium; the caller closes it, which ends its process. */
export function launchBrowser(): Promise<Browser> {
  return puppeteer.launch({
    executablePath: chromiumPath(),
    headless: true,
    // Tests run as root in CI containers, where Chromium's sandbox cannot start.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      `--host-resolver-rules=MAP ${otherSite} 127.0.0.1`,
    ],
  });
}

/**
 * A page in a context of its own (no cookie shared with another test), 1280 × 900, that records what the
 * browser refused or failed at: Content-Security-Policy violations and script errors.
 */
export async function openPage(browser: Browser): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`script error: ${(error as Error).message}`));
  page.on('console', (message) => {
    if (/Content Security Policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
  });
  return { page, problems };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(screenshotDir, { recursive: true });
  await page.screenshot({ path: path.join(screenshotDir, `${name}.png`), fullPage: true });
}

/** Logs in through the console's form and waits for its tabs. */
export async function logIn(
  page: Page,
  adminUrl: string,
  user: { username: string; password: string },
): Promise<void> {
  await page.goto(`${adminUrl}/`);
  await page.waitForSelector('form.login');
  await page.type('input[name=username]', user.username);
  await page.type('input[name=password]', user.password);
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('header.top nav');
}

/** The text of the first element `selector` matches, once it holds `expected`. */
export async function waitForText(page: Page, selector: string, expected: string): Promise<string> {
  const handle = await page.waitForFunction(
    (css, text) => {
      const found = [...document.querySelectorAll(css)].find((element) =>
        element.textContent?.includes(text),
      );
      return found?.textContent ?? false;
    },
    {},
    selector,
    expected,
  );
  return (await handle.jsonValue()) as string;
}

/** The console suites' application of conf/, with a key of its own. */
export const mobile = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  apikey_development: 'app-key-0123456789abcdef0123456789',
};

/**
 * Registers a console suite's hooks: one Chromium for the suite, and after each test its gateways stopped
 * and its pages closed, each page checked for anything the browser refused (Content-Security-Policy).
 */
export function useConsoleBrowser() {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchBrowser();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  const defer = cleanupAfterEach();

  return {
    /** The suite's Chromium. */
    browser: () => browser,
    /** Runs `cleanup` after the test, before the cleanups deferred earlier. */
    defer,
    /** A gateway over a real upstream, with the pets API and `extra` config. */
    async start(extra: Record<string, unknown> = {}): Promise<TestGateway> {
      const started = await startGatewayOverUpstream((url) => petsConfig(`${url}/pets`, extra));
      defer(() => started.close());
      return started.gateway;
    },
    /** A page of its own browser context. */
    async page(): Promise<Page> {
      const opened = await openPage(browser);
      opened.page.setDefaultTimeout(10_000);
      defer(async () => {
        await opened.page.browserContext().close();
        expect(opened.problems).toEqual([]);
      });
      return opened.page;
    },
  };
}

/** A call to the Quota API as the admin. */
export const api = (gateway: TestGateway, path: string, init: RequestInit = {}) =>
  fetch(`${gateway.adminUrl}/api/portal/v1.3${path}`, {
    ...init,
    headers: { authorization: userAuth(adminUser), 'content-type': 'application/json', ...init.headers },
  });

export interface Quota {
  id: string;
  name: string;
  restrictions: Array<{ api: string; method: string; config: Record<string, string> }>;
}

export async function quotas(gateway: TestGateway): Promise<Quota[]> {
  return (await (await api(gateway, '/quotas')).json()) as Quota[];
}

/** Selects the option of `selector` whose text starts with `label`. */
export async function choose(target: Page, selector: string, label: string): Promise<void> {
  const value = await target.$eval(
    selector,
    (element, text) =>
      [...(element as HTMLSelectElement).options].find((option) => option.textContent?.startsWith(text))
        ?.value,
    label,
  );
  expect(value, `${selector} offers ${label}`).toBeDefined();
  await target.select(selector, value!);
}
