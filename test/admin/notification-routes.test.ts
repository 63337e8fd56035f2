import { afterEach, describe, expect, it } from 'vitest';
import {
  adminCall,
  memberUser,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

const secret = 'test-events-secret-0123456789';
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface TestAnswer {
  id: string;
  results: Array<{ url: string; delivered: boolean; status?: number; error?: string }>;
}

async function twoReceivers(): Promise<{ gateway: TestGateway; up: WebhookReceiver; down: WebhookReceiver }> {
  const up = await startWebhookReceiver(secret);
  const down = await startWebhookReceiver(secret);
  cleanups.push(
    () => up.close(),
    () => down.close(),
  );
  await down.stop();
  const gateway = await startTestGateway(
    petsConfig('http://127.0.0.1:9', {
      notifications: {
        webhooks: [
          { url: up.url, secret },
          { url: down.url, secret, thresholds: [100] },
        ],
      },
    }),
  );
  cleanups.push(() => gateway.close());
  return { gateway, up, down };
}

describe('POST /api/portal/v1.3/notifications/test', () => {
  it('sends a signed test event to every webhook and answers what each said', async () => {
    const { gateway, up, down } = await twoReceivers();
    const res = await adminCall(gateway, 'POST', '/notifications/test', {});
    expect(res.status).toBe(200);
    const answer = (await res.json()) as TestAnswer;
    expect(answer.results).toEqual([
      { url: up.url, delivered: true, status: 200 },
      { url: down.url, delivered: false, error: 'ECONNREFUSED' },
    ]);
    expect(up.delivered).toHaveLength(1);
    expect(up.delivered[0]!.signed).toBe(true);
    expect(up.delivered[0]!.event).toMatchObject({
      id: answer.id,
      type: 'quotagate.notification.test',
      source: 'quotagate',
      data: { user: 'ann' },
    });
  });

  it('sends to the one webhook named by url, and answers 404 for a url no webhook has', async () => {
    const { gateway, up } = await twoReceivers();
    up.answer = 500;
    const res = await adminCall(gateway, 'POST', '/notifications/test', { url: up.url });
    expect(res.status).toBe(200);
    expect(((await res.json()) as TestAnswer).results).toEqual([
      { url: up.url, delivered: false, status: 500 },
    ]);
    const unknown = await adminCall(gateway, 'POST', '/notifications/test', { url: 'http://127.0.0.1:1/x' });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).toContain(
      "no webhook of notifications.webhooks has the url 'http://127.0.0.1:1/x'",
    );
  });

  it('is refused to a member (403), and never shows the secret', async () => {
    const { gateway } = await twoReceivers();
    const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/notifications/test`, {
      method: 'POST',
      headers: { authorization: userAuth(memberUser), 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(403);
    await adminCall(gateway, 'POST', '/notifications/test', {});
    expect(gateway.rawLogs()).not.toContain(secret);
  });

  it('is documented in the admin OpenAPI document, its body and its answer', async () => {
    const { gateway } = await twoReceivers();
    const document = (await (await adminCall(gateway, 'GET', '/openapi.json')).json()) as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
    };
    const operation = document.paths['/api/portal/v1.3/notifications/test']!.post!;
    expect(operation.operationId).toBe('testNotifications');
    expect(JSON.stringify(operation.requestBody)).toContain('"url"');
    expect(JSON.stringify((operation.responses as Record<string, unknown>)['200'])).toContain('"delivered"');
  });
});
