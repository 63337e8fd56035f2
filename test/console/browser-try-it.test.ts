import { describe, expect, it } from 'vitest';
import type { Page } from 'puppeteer-core';
import { logIn, useConsoleBrowser, waitForText } from '../helpers/browser.js';
import { accessLines, adminUser, petsConfig } from '../helpers/test-gateway.js';

/**
 * "Try it" of the API documentation tab, tried as a new user would, in a real Chromium over a real
 * gateway: a required path parameter left empty, a gRPC method, a WebSocket endpoint.
 */
const { start, page } = useConsoleBrowser();

const [petsApi] = petsConfig('http://127.0.0.1:9/pets').apis as Array<Record<string, unknown>>;
const greeterApi = {
  id: '0c8f5a2e-7d41-4b9e-a3c6-5e1f2d7b9a40',
  name: 'Greeter',
  basePath: '/helloworld.Greeter',
  upstream: 'http://127.0.0.1:9',
  protocol: 'grpc',
  methods: [
    { id: '6a2d9e4b-1c73-4f58-b0e2-8d4a6c1f3e51', name: 'SayHello', verb: 'POST', path: '/SayHello' },
  ],
};
const chatApi = {
  id: '9d3b7f1a-4e62-4c85-b9a0-2f6e8c1d5b72',
  name: 'Chat',
  basePath: '/chat',
  upstream: 'http://127.0.0.1:9',
  methods: [
    { id: '2e7c4a9f-6b13-4d80-8f5e-1a9c3d7b2e63', name: 'openChat', verb: 'GET', path: '/', websocket: true },
  ],
};

/** Opens the documentation tab and the operation named `name`. */
async function openOperation(browserPage: Page, adminUrl: string, name: string) {
  await logIn(browserPage, adminUrl, adminUser);
  await browserPage.goto(`${adminUrl}/#/docs`);
  await browserPage.waitForSelector(`details[data-operation=${name}] summary`);
  await browserPage.click(`details[data-operation=${name}] summary`);
}

describe('"try it" of the API documentation tab', () => {
  it('sends nothing while a required path parameter is empty, and says which one', async () => {
    const gateway = await start();
    const browserPage = await page();
    await openOperation(browserPage, gateway.adminUrl, 'getPet');
    await (await browserPage.waitForSelector('details[data-operation=getPet] button[type=submit]'))!.click();
    await waitForText(browserPage, 'details[data-operation=getPet] .try-result', 'petId');
    const said = await browserPage.$eval('details[data-operation=getPet] .try-result', (element) =>
      element.textContent?.trim(),
    );
    expect(said).toBe('Fill in petId: the path of getPet needs it.');
    // A blank is no value either: /pets/%20 is not what the user meant.
    await browserPage.type('details[data-operation=getPet] input[name=param-petId]', '   ');
    await browserPage.click('details[data-operation=getPet] button[type=submit]');
    await waitForText(browserPage, 'details[data-operation=getPet] .try-result', 'Fill in petId');
    expect(accessLines(gateway)).toEqual([]);
  });

  it('offers no form for a gRPC method, which it cannot call over HTTP/1.1, but a note that says how to call it', async () => {
    const gateway = await start({ apis: [petsApi, greeterApi] });
    const browserPage = await page();
    await openOperation(browserPage, gateway.adminUrl, 'SayHello');
    const note = await waitForText(browserPage, 'details[data-operation=SayHello] .note', 'gRPC');
    expect(note).toContain('grpcurl');
    expect(note).toContain('helloworld.Greeter/SayHello');
    expect(await browserPage.$('details[data-operation=SayHello] form')).toBeNull();
  });

  it('offers no form for a WebSocket endpoint, which a plain GET cannot open, but a note that says how to connect', async () => {
    const gateway = await start({ apis: [petsApi, chatApi] });
    const browserPage = await page();
    await openOperation(browserPage, gateway.adminUrl, 'openChat');
    const note = await waitForText(browserPage, 'details[data-operation=openChat] .note', 'WebSocket');
    // The document's address: conf/'s port (0 here, where the test gateway picks one).
    expect(note).toMatch(/wscat -c ws:\/\/127\.0\.0\.1:\d+\/chat$/);
    expect(await browserPage.$('details[data-operation=openChat] form')).toBeNull();
  });
});
