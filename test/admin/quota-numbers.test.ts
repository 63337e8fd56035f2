import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  adminUser,
  basicAuth,
  devKey,
  petsConfig,
  startTestGateway,
  userAuth,
  type TestGateway,
} from '../helpers/test-gateway.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';

const portal = '/api/portal/v1.3';
const mbRule = 'must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals';
const messagesRule = 'must be a whole number from 1 to 1000000000000';
const perRule = 'must be a whole number from 1 to 1000000';

interface Answer {
  status: number;
  etag: string | null;
  body: unknown;
}

async function call(gateway: TestGateway, method: string, url: string, raw?: string): Promise<Answer> {
  const res = await fetch(`${gateway.adminUrl}${portal}${url}`, {
    method,
    headers: { authorization: userAuth(adminUser), ...(raw ? { 'content-type': 'application/json' } : {}) },
    body: raw,
  });
  const text = await res.text();
  return { status: res.status, etag: res.headers.get('etag'), body: text ? JSON.parse(text) : undefined };
}

/** A QuotaDTO with one restriction whose config is spelt exactly as `config` (raw JSON text). */
const dtoWithConfig = (type: 'throttle' | 'throttlemb', config: string) =>
  `{"type":"API","name":"numbers","restrictions":[{"api":"*","method":"*","type":"${type}","config":${config}}]}`;
const mbConfig = (mb: string) => dtoWithConfig('throttlemb', `{"mb":${mb},"per":1,"period":"day"}`);
const messagesConfig = (messages: string) =>
  dtoWithConfig('throttle', `{"messages":${messages},"per":1,"period":"day"}`);
const perConfig = (per: string) => dtoWithConfig('throttle', `{"messages":1,"per":${per},"period":"second"}`);

const refused: Array<[string, string, string]> = [
  ['mb 1e-7 as a number', mbConfig('1e-7'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "1e-7" as a string', mbConfig('"1e-7"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 0.0000001 as a number', mbConfig('0.0000001'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "0.0000001" as a string', mbConfig('"0.0000001"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 5e-324 as a number', mbConfig('5e-324'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 953674317 as a number', mbConfig('953674317'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "953674317" as a string', mbConfig('"953674317"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 953674316.40625 (10^15 bytes)', mbConfig('953674316.40625'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 1e9 as a number', mbConfig('1e9'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 1e21 as a number', mbConfig('1e21'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 1e400 as a number', mbConfig('1e400'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "1e3" as a string', mbConfig('"1e3"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 1.0000001 as a number', mbConfig('1.0000001'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "1.0000000" (7 decimals)', mbConfig('"1.0000000"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 0.30000000000000004', mbConfig('0.30000000000000004'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb 0', mbConfig('0'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb -0', mbConfig('-0'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "0.000000"', mbConfig('"0.000000"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb -1', mbConfig('-1'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "-1"', mbConfig('"-1"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "+1"', mbConfig('"+1"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb ".5"', mbConfig('".5"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "5."', mbConfig('"5."'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "1,5"', mbConfig('"1,5"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "0x10"', mbConfig('"0x10"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "1_000"', mbConfig('"1_000"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb "Infinity"', mbConfig('"Infinity"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb Arabic-Indic digits', mbConfig('"\\u0661"'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb ""', mbConfig('""'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb true', mbConfig('true'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb null', mbConfig('null'), `restrictions[0].config.mb: ${mbRule}`],
  ['mb []', mbConfig('[]'), `restrictions[0].config.mb: ${mbRule}`],
  ['messages 1e13', messagesConfig('1e13'), `restrictions[0].config.messages: ${messagesRule}`],
  [
    'messages 1000000000001',
    messagesConfig('1000000000001'),
    `restrictions[0].config.messages: ${messagesRule}`,
  ],
  [
    'messages "99999999999999999999999"',
    messagesConfig('"99999999999999999999999"'),
    `restrictions[0].config.messages: ${messagesRule}`,
  ],
  ['messages 1e21', messagesConfig('1e21'), `restrictions[0].config.messages: ${messagesRule}`],
  ['messages 1e-7', messagesConfig('1e-7'), `restrictions[0].config.messages: ${messagesRule}`],
  ['messages "1e3"', messagesConfig('"1e3"'), `restrictions[0].config.messages: ${messagesRule}`],
  ['messages "1.0"', messagesConfig('"1.0"'), `restrictions[0].config.messages: ${messagesRule}`],
  ['messages 1.5', messagesConfig('1.5'), `restrictions[0].config.messages: ${messagesRule}`],
  ['per 1000001', perConfig('1000001'), `restrictions[0].config.per: ${perRule}`],
  ['per 0.5', perConfig('0.5'), `restrictions[0].config.per: ${perRule}`],
  ['per "1e3"', perConfig('"1e3"'), `restrictions[0].config.per: ${perRule}`],
];

const accepted: Array<[string, string, Record<string, string>, number]> = [
  ['mb 9.5e8 as a number', mbConfig('9.5e8'), { mb: '950000000' }, 996_147_200_000_000],
  ['mb 953674316 as a number', mbConfig('953674316'), { mb: '953674316' }, 999_999_999_574_016],
  [
    'mb "953674316.406249", the largest',
    mbConfig('"953674316.406249"'),
    { mb: '953674316.406249' },
    999_999_999_999_998,
  ],
  ['mb 0.000001 as a number, the smallest', mbConfig('0.000001'), { mb: '0.000001' }, 1],
  ['mb 1e-6 as a number', mbConfig('1e-6'), { mb: '0.000001' }, 1],
  ['mb "0.000001" as a string', mbConfig('"0.000001"'), { mb: '0.000001' }, 1],
  ['mb 1e3 as a number', mbConfig('1e3'), { mb: '1000' }, 1_048_576_000],
  ['mb "1.500000"', mbConfig('"1.500000"'), { mb: '1.5' }, 1_572_864],
  ['mb 1.5', mbConfig('1.5'), { mb: '1.5' }, 1_572_864],
  ['mb "007"', mbConfig('"007"'), { mb: '7' }, 7_340_032],
  ['messages 1e3 as a number', messagesConfig('1e3'), { messages: '1000' }, 1000],
  ['messages 1e12 as a number', messagesConfig('1e12'), { messages: '1000000000000' }, 1e12],
  ['messages "1000000000000"', messagesConfig('"1000000000000"'), { messages: '1000000000000' }, 1e12],
  ['per 1e3 as a number', perConfig('1e3'), { messages: '1', per: '1000' }, 1],
];

describe.each(['memory', 'redis'] as const)('numbers of a quota (%s store)', (storeType) => {
  let gateway: TestGateway;
  const prefix = `test:${randomUUID()}:`;
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-numbers-'));
  const store =
    storeType === 'redis'
      ? { type: 'redis', url: inject('redisUrl'), prefix }
      : { type: 'memory', file: path.join(dir, 'quotas.json') };
  const startOne = () => startTestGateway(petsConfig('http://127.0.0.1:9', { store }));

  beforeAll(async () => {
    gateway = await startOne();
  });
  afterAll(async () => {
    await gateway.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(refused)(
    'refuses %s with 400 naming the field, and stores nothing',
    async (_case, raw, message) => {
      const before = ((await call(gateway, 'GET', '/quotas')).body as unknown[]).length;
      const answer = await call(gateway, 'POST', '/quotas', raw);
      expect(answer.status).toBe(400);
      expect(answer.body).toEqual({ errors: [{ code: 400, message }] });
      expect(((await call(gateway, 'GET', '/quotas')).body as unknown[]).length).toBe(before);
    },
  );

  it.each(accepted)(
    'accepts %s, echoes it as a canonical string and enforces exactly its units',
    async (_case, raw, expected, units) => {
      const created = await call(gateway, 'POST', '/quotas', raw);
      expect(created.status).toBe(201);
      const quota = created.body as { id: string; restrictions: Array<{ config: Record<string, string> }> };
      expect(quota.restrictions[0]!.config).toMatchObject(expected);
      const usage = await call(gateway, 'GET', `/quotas/${quota.id}/usage`);
      expect(usage.body).toMatchObject({ restrictions: [{ limit: units }] });
    },
  );

  it('refuses every bad number of a body at once', async () => {
    const answer = await call(
      gateway,
      'POST',
      '/quotas',
      `{"type":"API","name":"n","restrictions":[` +
        `{"api":"*","method":"*","type":"throttlemb","config":{"mb":1e-7,"per":0,"period":"day"}},` +
        `{"api":"*","method":"*","type":"throttle","config":{"messages":"1e3","per":1,"period":"fortnight"}}]}`,
    );
    expect(answer.status).toBe(400);
    expect(
      (answer.body as { errors: Array<{ message: string }> }).errors.map((e) => e.message).sort(),
    ).toEqual(
      [
        `restrictions[0].config.mb: ${mbRule}`,
        `restrictions[0].config.per: ${perRule}`,
        `restrictions[1].config.messages: ${messagesRule}`,
        'restrictions[1].config.period: must be one of second, seconds, minute, minutes, hour, hours, day, days, week, weeks, month, months, year, years',
      ].sort(),
    );
  });

  it(
    storeType === 'redis'
      ? 'shows what it accepted to a second gateway and to a later one unchanged'
      : 'keeps what it accepted unchanged through a restart',
    async () => {
      const created: Answer[] = [];
      for (const [, raw] of accepted) created.push(await call(gateway, 'POST', '/quotas', raw));
      created.push(
        await call(
          gateway,
          'PUT',
          '/quotas/00000000-0000-0000-0000-000000000000',
          `{"type":"API","name":"System","restrictions":[` +
            `{"api":"*","method":"*","type":"throttlemb","config":{"mb":953674316.406249,"per":"7","period":"days"}},` +
            `{"api":"*","method":"*","verb":"GET","type":"throttle","config":{"messages":1e12,"per":1e6,"period":"second"}}]}`,
        ),
      );
      const readers: TestGateway[] = [];
      if (storeType === 'redis') readers.push(await startOne());
      await gateway.close();
      gateway = await startOne();
      readers.push(gateway);
      try {
        for (const reader of readers) {
          for (const answer of created) {
            const id = (answer.body as { id: string }).id;
            await expect
              .poll(async () => {
                const read = await call(reader, 'GET', `/quotas/${id}`);
                return { status: read.status, body: read.body, etag: read.etag };
              })
              .toEqual({ status: 200, body: answer.body, etag: answer.etag });
          }
        }
      } finally {
        if (readers[0] !== gateway) await readers[0]!.close();
      }
    },
  );
});

describe('RateLimit-Policy of the largest throttlemb', () => {
  let upstream: TestUpstream;
  let gateway: TestGateway;
  beforeAll(async () => {
    upstream = await startUpstream();
    gateway = await startTestGateway(petsConfig(upstream.url));
  });
  afterAll(async () => {
    await gateway.close();
    await upstream.close();
  });

  it('carries a q of at most 15 digits for the largest mb accepted', async () => {
    const answer = await call(
      gateway,
      'PUT',
      '/quotas/00000000-0000-0000-0000-000000000000',
      dtoWithConfig('throttlemb', '{"mb":"953674316.406249","per":1,"period":"day"}'),
    );
    expect(answer.status).toBe(200);
    const res = await fetch(`${gateway.url}/pets/1`, { headers: { authorization: basicAuth(devKey) } });
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit-policy')).toMatch(/;q=999999999999998;w=86400;/);
  });
});
