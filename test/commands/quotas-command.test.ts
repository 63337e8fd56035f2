import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import YAML from 'yaml';
import { suiteRedis } from '../helpers/redis-clients.js';
import { cliPath, runCli } from '../helpers/run-cli.js';
import {
  adminUser,
  petsApiId,
  petsConfig,
  startTestGateway,
  systemQuotaId,
  throttle,
  userAuth,
  writeSeedConfigDir,
} from '../helpers/test-gateway.js';

/**
 * `gateway quotas export` and `import` through the real CLI, against the memory store's file and against
 * a real Redis (a prefix of its own per test), with running gateways where a test needs one.
 */
const mobile = {
  id: '3b9d7c1e-5f2a-4e6b-8c0d-1a2b3c4d5e6f',
  name: 'Mobile app',
  apikey_development: 'app-key-0123456789abcdef0123456789',
};
const quotaFile = {
  quotas: [
    { id: systemQuotaId, type: 'API', name: 'System', restrictions: [throttle(100, 1, 'second')] },
    {
      id: '7d2f0c1a-4b5e-4c6d-9e8f-0a1b2c3d4e5f',
      type: 'API',
      name: 'Pets',
      description: 'per API',
      restrictions: [
        { ...throttle(10, 1, 'seconds'), api: petsApiId },
        {
          api: '*',
          method: '*',
          type: 'throttle',
          config: {
            messages: 1000,
            per: 1,
            period: 'month',
            window: 'calendar',
            timeZone: 'America/New_York',
            startDay: 28,
          },
        },
      ],
    },
    {
      id: 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d',
      type: 'APPLICATION',
      name: 'Mobile',
      application: mobile.id,
      restrictions: [
        { api: '*', method: '*', type: 'throttlemb', config: { mb: 1.5, per: 1, period: 'day' } },
        { api: '*', method: '*', type: 'concurrency', config: { connections: 4 } },
        {
          api: '*',
          method: '*',
          type: 'throttleunits',
          config: {
            units: 1000,
            per: 1,
            period: 'day',
            body: ['message.usage.input_tokens', 'usage.output_tokens'],
          },
        },
      ],
    },
  ],
};

const dirs: string[] = [];
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function configDir(store: Record<string, unknown> = {}): string {
  const dir = writeSeedConfigDir(petsConfig('http://127.0.0.1:9/pets', { applications: [mobile], store }));
  dirs.push(dir);
  return dir;
}

const redisStore = () => ({ type: 'redis', url: inject('redisUrl'), prefix: `test:${randomUUID()}:` });

function scratch(name: string, content: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'quotagate-quotas-'));
  dirs.push(dir);
  const file = path.join(dir, name);
  writeFileSync(file, content);
  return file;
}

const quotas = (dir: string, ...args: string[]) => runCli(['quotas', ...args, '--config-dir', dir]);

describe.each([
  ['the memory store', () => ({})],
  ['the Redis store', redisStore],
])('gateway quotas on %s', (_name, store) => {
  it('imports a file, exports what it imported, and a second import changes nothing', async () => {
    const dir = configDir(store());
    const file = scratch('quotas.yaml', YAML.stringify(quotaFile));
    const imported = await quotas(dir, 'import', file);
    expect(imported.code).toBe(0);
    // A test Redis without persistence earns a warning; nothing worse is said.
    expect(imported.stderr).not.toMatch(/^gateway quotas: (error|fatal):/m);
    expect(imported.stdout).toContain('2 to create, 1 to replace, 0 unchanged');

    const exported = await quotas(dir, 'export', '--format', 'json');
    expect(exported.code).toBe(0);
    const document = JSON.parse(exported.stdout) as { quotas: Array<Record<string, unknown>> };
    expect(document.quotas.map((quota) => quota.id)).toEqual([
      systemQuotaId,
      '00000000-0000-0000-0000-000000000001',
      '7d2f0c1a-4b5e-4c6d-9e8f-0a1b2c3d4e5f',
      'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d',
    ]);
    // A calendar window travels whole: window, time zone and billing day.
    expect((document.quotas[2]!.restrictions as Array<{ config: unknown }>)[1]!.config).toEqual({
      messages: '1000',
      per: '1',
      period: 'month',
      window: 'calendar',
      timeZone: 'America/New_York',
      startDay: 28,
    });
    expect(document.quotas[3]).toEqual({
      id: 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d',
      type: 'APPLICATION',
      name: 'Mobile',
      description: '',
      restrictions: [
        { api: '*', method: '*', type: 'throttlemb', config: { mb: '1.5', per: '1', period: 'day' } },
        { api: '*', method: '*', type: 'concurrency', config: { connections: '4' } },
        {
          api: '*',
          method: '*',
          type: 'throttleunits',
          config: {
            units: '1000',
            per: '1',
            period: 'day',
            body: ['message.usage.input_tokens', 'usage.output_tokens'],
          },
        },
      ],
      application: mobile.id,
    });

    // The export, imported again (as YAML), is the store as it is.
    const again = await quotas(dir, 'import', scratch('export.yaml', (await quotas(dir, 'export')).stdout));
    expect(again.stdout).toContain('0 to create, 0 to replace, 4 unchanged');
    expect((await quotas(dir, 'export', '--format', 'json')).stdout).toBe(exported.stdout);
  });

  it('--dry-run says what it would do and writes nothing', async () => {
    const dir = configDir(store());
    const before = (await quotas(dir, 'export')).stdout;
    const dry = await quotas(dir, 'import', scratch('quotas.json', JSON.stringify(quotaFile)), '--dry-run');
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('would create 7d2f0c1a-4b5e-4c6d-9e8f-0a1b2c3d4e5f Pets');
    expect(dry.stdout).toContain('dry run: nothing written; 2 to create, 1 to replace, 0 unchanged');
    expect((await quotas(dir, 'export')).stdout).toBe(before);
  });
});

describe('gateway quotas import', () => {
  it('refuses crafted files and writes nothing: an alias bomb, a __proto__ key, a field of its own, an id that is a path', async () => {
    const dir = configDir();
    const before = (await quotas(dir, 'export', '--format', 'json')).stdout;
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x, x]',
      ...Array.from({ length: 8 }, (_, i) => {
        const name = String.fromCharCode(98 + i);
        const previous = String.fromCharCode(97 + i);
        return `${name}: &${name} [${Array(10).fill(`*${previous}`).join(', ')}]`;
      }),
      'quotas: *i',
    ].join('\n');
    const crafted = [
      scratch('bomb.yaml', bomb),
      scratch(
        'proto.json',
        `{"quotas":[{"__proto__":{"system":true},${JSON.stringify(quotaFile.quotas[1]).slice(1)}]}`,
      ),
      scratch('extra.json', JSON.stringify({ quotas: [{ ...quotaFile.quotas[1], file: '/etc/passwd' }] })),
      scratch(
        'path.json',
        JSON.stringify({ quotas: [{ ...quotaFile.quotas[1], id: '../../../etc/passwd' }] }),
      ),
    ];
    for (const file of crafted) {
      const result = await quotas(dir, 'import', file);
      expect(result.code, file).toBe(2);
      expect(result.stderr, file).toContain(file);
    }
    expect((await quotas(dir, 'export', '--format', 'json')).stdout).toBe(before);
  });

  it('names every mistake of a file at once, and writes nothing', async () => {
    const dir = configDir();
    const bad = scratch(
      'bad.yaml',
      YAML.stringify({
        quotas: [
          {
            ...quotaFile.quotas[1],
            id: 'nope',
            restrictions: [{ ...throttle(0, 1, 'fortnight'), api: petsApiId }],
          },
          { ...quotaFile.quotas[2], application: 'ghost' },
        ],
      }),
    );
    const result = await quotas(dir, 'import', bad);
    expect(result.code).toBe(2);
    expect(result.stderr.trim().split('\n')).toEqual([
      `${bad}: quotas[0].id: must be a UUID`,
      `${bad}: quotas[0].restrictions[0].config.messages: must be a whole number from 1 to 1000000000000`,
      `${bad}: quotas[0].restrictions[0].config.period: must be one of second, seconds, minute, minutes, hour, hours, day, days, week, weeks, month, months, year, years`,
      `${bad}: quotas[1].application: no application has id 'ghost' (in conf/, made through the admin API, or in the file's applications)`,
    ]);
    expect(JSON.parse((await quotas(dir, 'export', '--format', 'json')).stdout).quotas).toHaveLength(2);
  });

  it('into Redis: the running gateways of the fleet follow within a second', async () => {
    const store = redisStore();
    const dir = configDir(store);
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9/pets', { applications: [mobile], store }),
    );
    cleanups.push(() => gateway.close());
    expect((await quotas(dir, 'import', scratch('quotas.yaml', YAML.stringify(quotaFile)))).code).toBe(0);
    const seen = async () => {
      const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3/quotas`, {
        headers: { authorization: userAuth(adminUser) },
      });
      return ((await res.json()) as Array<{ id: string }>).length;
    };
    await expect.poll(seen, { timeout: 1_000, interval: 50 }).toBe(4);
  });

  it("refuses the memory store's file while its gateway runs, however that gateway was started", async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'quotagate-owned-')), 'quotas.json');
    dirs.push(path.dirname(file));
    const store = { type: 'memory', file };
    const dir = configDir(store);
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9/pets', { applications: [mobile], store }),
    );
    let running = true;
    cleanups.push(async () => {
      if (running) await gateway.close();
    });
    const importing = () => quotas(dir, 'import', scratch('quotas.yaml', YAML.stringify(quotaFile)));
    const refused = await importing();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`the gateway (process ${process.pid}) owns`);
    running = false;
    await gateway.close();
    expect((await importing()).code).toBe(0);
  });
});

describe('gateway quotas with many quotas, and applications made through the API', () => {
  it('exports whole into a pipe whose reader is slow, and imports what it exported, own quotas of API-made applications included', async () => {
    const store = redisStore();
    const dir = configDir(store);
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9/pets', { applications: [mobile], store }),
    );
    cleanups.push(() => gateway.close());
    const headers = { authorization: userAuth(adminUser), 'content-type': 'application/json' };
    const made = (await (
      await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'Partner portal' }),
      })
    ).json()) as { id: string };
    const own = await fetch(`${gateway.adminUrl}/api/portal/v1.3/applications/${made.id}/quota`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ restrictions: [throttle(5, 1, 'minute')] }),
    });
    expect(own.status).toBe(201);
    const many = Array.from({ length: 600 }, (_, i) => ({
      id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      type: 'API',
      name: `Quota number ${i} with a name long enough to make the export large`,
      restrictions: [throttle(i + 1, 1, 'hour')],
    }));
    expect((await quotas(dir, 'import', scratch('many.yaml', YAML.stringify({ quotas: many })))).code).toBe(
      0,
    );

    const whole = (await quotas(dir, 'export', '--format', 'json')).stdout;
    expect(whole.length).toBeGreaterThan(150_000);
    // A reader that takes its time: the writer must not exit before the pipe has taken everything.
    const piped = await new Promise<string>((resolve, reject) => {
      const command = `"${process.execPath}" "${cliPath}" quotas export --format json --config-dir "${dir}"`;
      const shell = spawn('sh', ['-c', `${command} | (sleep 1; wc -c)`]);
      let out = '';
      shell.stdout.on('data', (chunk) => (out += String(chunk)));
      shell.on('error', reject);
      shell.on('exit', () => resolve(out.trim()));
    });
    expect(Number(piped)).toBe(Buffer.byteLength(whole));

    const again = await quotas(dir, 'import', scratch('export.json', whole));
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('0 to create, 0 to replace, 603 unchanged');
  }, 60_000);
});

describe('what gateway quotas prints', () => {
  const redis = suiteRedis();

  it('writes only the export or the report to stdout, and what it logs to stderr as sentences, never JSON lines', async () => {
    const store = redisStore();
    const dir = configDir(store);
    // A definition this gateway refuses: the store logs an error whenever it loads the set, and the
    // import replaces it.
    const unreadable = randomUUID();
    await redis().hset(`${store.prefix}{quotas}:definitions`, unreadable, 'not a quota');
    const fixed = { id: unreadable, type: 'API', name: 'Fixed', restrictions: [] };
    const exported = await quotas(dir, 'export');
    expect(exported.code).toBe(0);
    expect(Object.keys(YAML.parse(exported.stdout) as object)).toEqual(['quotas']);
    const file = scratch('quotas.yaml', YAML.stringify({ quotas: [...quotaFile.quotas, fixed] }));
    const imported = await quotas(dir, 'import', file);
    expect(imported.code).toBe(0);
    expect(imported.stdout.trim().split('\n')).toEqual([
      `replaced ${systemQuotaId} System`,
      'created 7d2f0c1a-4b5e-4c6d-9e8f-0a1b2c3d4e5f Pets',
      `created a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d Mobile (application ${mobile.id})`,
      `replaced ${unreadable} Fixed`,
      '2 to create, 2 to replace, 0 unchanged',
    ]);
    expect(exported.stderr).toContain(`(id: ${unreadable}, problems: not JSON)`);
    for (const { stderr } of [exported, imported]) {
      expect(stderr).toMatch(
        /^gateway quotas: error: a stored quota definition breaks the quota schema; it is not enforced/m,
      );
      expect(stderr).not.toMatch(/^\s*\{/m);
    }
  });
});

describe('moving from the memory store to Redis', () => {
  it('says how at the first start on an empty Redis, and the commands it names move the quotas', async () => {
    const memory = configDir();
    expect((await quotas(memory, 'import', scratch('quotas.yaml', YAML.stringify(quotaFile)))).code).toBe(0);
    const file = path.join(memory, 'quotas.json');
    const store = { ...redisStore(), file };
    const gateway = await startTestGateway(
      petsConfig('http://127.0.0.1:9/pets', { applications: [mobile], store }),
    );
    cleanups.push(() => gateway.close());
    const hint = gateway.logs.find((line) => String(line.msg).startsWith('Redis holds no quotas yet'));
    expect(hint?.msg).toContain(
      `gateway quotas export --from-file ${file} > quotas.yaml, then gateway quotas import quotas.yaml`,
    );

    const redis = configDir(store);
    const exported = await quotas(redis, 'export', '--from-file', file);
    expect(exported.code).toBe(0);
    expect((await quotas(redis, 'import', scratch('moved.yaml', exported.stdout))).stdout).toContain(
      '2 to create, 1 to replace, 1 unchanged',
    );
    expect(readFileSync(file, 'utf8')).toContain('7d2f0c1a-4b5e-4c6d-9e8f-0a1b2c3d4e5f');
  });
});
