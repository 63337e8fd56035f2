import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

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
