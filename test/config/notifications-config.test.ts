import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { secretValues } from '../../src/kit/secret-redaction.js';
import { problemsOf } from '../helpers/config-problems.js';
import { applicationDefaultQuotaId, petsConfig, throttle, writeConfigDir } from '../helpers/test-gateway.js';

const secret = 'config-secret-0123456789';
const withWebhooks = (webhooks: unknown[], extra: Record<string, unknown> = {}) =>
  writeConfigDir(petsConfig('http://127.0.0.1:9', { notifications: { webhooks }, ...extra }));

describe('notifications.webhooks', () => {
  it('defaults thresholds to 80 and 100, and keeps the secret out of the log', async () => {
    const { config } = await loadConfig({
      configDir: withWebhooks([{ url: 'https://hooks.example/q', secret }]),
    });
    expect(config.notifications.webhooks).toEqual([
      { url: 'https://hooks.example/q', secret, thresholds: [80, 100] },
    ]);
    expect(secretValues(config)).toContain(secret);
  });

  it('has no webhook by default', async () => {
    const { config } = await loadConfig({ configDir: withWebhooks([]) });
    expect(config.notifications).toEqual({ webhooks: [] });
  });

  it('refuses a url that is not http(s), a short secret, and thresholds out of order or range', async () => {
    const problems = await problemsOf(
      withWebhooks([
        { url: 'ftp://hooks.example/q', secret },
        { url: 'https://hooks.example/q', secret: 'short' },
        { url: 'https://hooks.example/q', secret, thresholds: [100, 80] },
        { url: 'https://hooks.example/q', secret, thresholds: [0, 101] },
        { url: 'https://hooks.example/q' },
        { url: 'https://user:password@hooks.example/q', secret },
      ]),
    );
    const thresholdsRule =
      'must be an array of whole percentages from 1 to 100, each once, in ascending order';
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringContaining('notifications.webhooks[0].url: must be an http(s) URL'),
        expect.stringContaining(
          'notifications.webhooks[1].secret: must be a string of at least 16 characters',
        ),
        expect.stringContaining(`notifications.webhooks[2].thresholds: ${thresholdsRule}`),
        expect.stringContaining(`notifications.webhooks[3].thresholds[0]: ${thresholdsRule}`),
        expect.stringContaining('notifications.webhooks[4].secret'),
        expect.stringContaining('notifications.webhooks[5].url: must not carry credentials'),
      ]),
    );
  });

  it("takes a quota's own thresholds, and refuses repeated ones", async () => {
    const quota = (thresholds: unknown) => ({
      quotas: [
        {
          id: applicationDefaultQuotaId,
          type: 'APPLICATION',
          name: 'Application Default',
          restrictions: [throttle(10, 1, 'minute')],
          thresholds,
        },
      ],
    });
    const { config } = await loadConfig({ configDir: withWebhooks([], quota([50, 90])) });
    expect(config.quotas[0]).toMatchObject({ thresholds: [50, 90] });
    const problems = await problemsOf(withWebhooks([], quota([50, 50])));
    expect(problems.join('\n')).toContain('quotas[0].thresholds: must be an array of whole percentages');
  });
});
