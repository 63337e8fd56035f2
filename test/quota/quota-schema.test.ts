import { describe, expect, it } from 'vitest';
import { catalogIds } from '../../src/quota/catalog-references.js';
import {
  canonicalAmount,
  quotaDtoSchema,
  unitsOf,
  type RestrictionConfig,
} from '../../src/quota/quota-schema.js';
import { problemsOf } from '../../src/quota/schema-problems.js';
import { etagOf, parseRecord, serializeRecord } from '../../src/quota/stored-records.js';

/** Records exactly as the previous version wrote them (its serializeRecord): their ETags must not change. */
const writtenBefore = [
  '{"id":"00000000-0000-0000-0000-000000000000","type":"API","name":"System","description":"Limits on all traffic, across every application","restrictions":[],"system":true}',
  '{"id":"3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f","type":"API","name":"Pets","description":"","restrictions":[{"api":"5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10","method":"c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32","verb":"GET","type":"throttle","config":{"messages":"10","per":"1","period":"seconds"}},{"api":"*","method":"*","type":"throttlemb","config":{"mb":"1.5","per":"2","period":"minute"}}],"system":false}',
  '{"id":"7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d","type":"APPLICATION","name":"Mobile","description":"d","restrictions":[{"api":"*","method":"*","type":"throttle","config":{"messages":"1000000000000","per":"1000000","period":"second"}}],"system":false,"application":"0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"}',
];

describe('the quota schema', () => {
  it.each(writtenBefore)(
    'reads a record the previous version wrote and writes it back byte for byte: %s',
    (text) => {
      const parsed = parseRecord(JSON.parse(text));
      if (!('record' in parsed)) throw new Error(parsed.problems.join('; '));
      expect(serializeRecord(parsed.record)).toBe(text);
      expect(etagOf(serializeRecord(parsed.record))).toBe(etagOf(text));
    },
  );

  it('refuses to write a record that it would refuse to read', () => {
    const parsed = parseRecord(JSON.parse(writtenBefore[1]!));
    if (!('record' in parsed)) throw new Error('expected a record');
    const { quota } = parsed.record;
    const tiny = {
      ...quota,
      restrictions: [{ ...quota.restrictions[1]!, config: { mb: '1e-7', per: '1', period: 'day' } }],
    };
    expect(() => serializeRecord({ quota: tiny as never })).toThrow(
      'not a storable quota: restrictions[0].config.mb: must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals',
    );
    expect(() => serializeRecord({ quota, application: 'mobile' })).toThrow(
      /application: only a quota of type APPLICATION/,
    );
  });

  it('writes the canonical form of what a client sent', () => {
    const dto = quotaDtoSchema().parse({
      type: 'API',
      name: 'n',
      restrictions: [
        { api: 'ABC', method: '*', type: 'throttlemb', config: { mb: 1e-6, per: '007', period: 'days' } },
      ],
    });
    const text = serializeRecord({
      quota: { id: '3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f', ...dto, system: false },
    });
    expect(text).toBe(
      '{"id":"3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f","type":"API","name":"n","description":"","restrictions":[{"api":"abc","method":"*","type":"throttlemb","config":{"mb":"0.000001","per":"7","period":"days"}}],"system":false}',
    );
  });

  it.each([
    [{ messages: '1000000000000', per: '1', period: 'second' }, 1e12],
    [{ mb: '0.000001', per: '1', period: 'second' }, 1],
    [{ mb: '0.5', per: '1', period: 'second' }, 524_288],
    [{ mb: '953674316.406249', per: '1', period: 'second' }, 999_999_999_999_998],
    [{ mb: '9.999999', per: '1', period: 'second' }, 10_485_758],
  ])('enforces exactly the whole units of %j', (config, units) => {
    expect(unitsOf(config as RestrictionConfig)).toBe(units);
  });

  it.each([
    [1e-7, 'mb', undefined],
    ['1e-7', 'mb', undefined],
    [1e-6, 'mb', '0.000001'],
    [9.5e8, 'mb', '950000000'],
    [953674317, 'mb', undefined],
    ['953674316.406250', 'mb', undefined],
    [' 12.50 ', 'mb', '12.5'],
    [1e3, 'messages', '1000'],
    ['1e3', 'messages', undefined],
    [1e12, 'messages', '1000000000000'],
    [1e12 + 1, 'messages', undefined],
    [-0, 'per', undefined],
    [1e6, 'per', '1000000'],
  ] as const)('spells %j as %s wants it: %s', (value, field, expected) => {
    expect(canonicalAmount(value, field)).toBe(expected);
  });

  it.each([
    ['client', 'client'],
    ['header:X-Tenant', 'header:x-tenant'],
    ['HEADER:x-api-caller', 'header:x-api-caller'],
  ])('keeps by %s as %s, and leaves it out when it is not given', (by, kept) => {
    const restriction = {
      api: '*',
      method: '*',
      type: 'throttle',
      config: { messages: 1, per: 1, period: 'day' },
    };
    const dto = quotaDtoSchema().parse({ type: 'API', name: 'n', restrictions: [{ ...restriction, by }] });
    expect(dto.restrictions[0]!.by).toBe(kept);
    const quota = { id: '3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f', ...dto, system: false };
    const parsed = parseRecord(JSON.parse(serializeRecord({ quota })));
    if (!('record' in parsed)) throw new Error(parsed.problems.join('; '));
    expect(parsed.record.quota.restrictions[0]!.by).toBe(kept);
    const plain = quotaDtoSchema().parse({ type: 'API', name: 'n', restrictions: [restriction] });
    expect('by' in plain.restrictions[0]!).toBe(false);
  });

  it.each([
    ['one path', 'usage.total_tokens'],
    ['a list of paths', ['message.usage.input_tokens', 'usage.output_tokens']],
  ])('keeps the body paths of a throttleunits as written (%s), with or without a header', (_case, body) => {
    for (const header of [{}, { header: 'X-Tokens' }]) {
      const restriction = {
        api: '*',
        method: '*',
        type: 'throttleunits',
        config: { units: 100, per: 1, period: 'hour', body, ...header },
      };
      const dto = quotaDtoSchema().parse({ type: 'API', name: 'n', restrictions: [restriction] });
      const quota = { id: '3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f', ...dto, system: false };
      const parsed = parseRecord(JSON.parse(serializeRecord({ quota })));
      if (!('record' in parsed)) throw new Error(parsed.problems.join('; '));
      expect(parsed.record.quota.restrictions[0]!.config).toEqual({
        units: '100',
        per: '1',
        period: 'hour',
        body,
        ...('header' in header ? { header: 'x-tokens' } : {}),
      });
    }
  });

  it.each(['ip', 'header:', 'header:X Tenant', `header:${'x'.repeat(65)}`, 'client ', 7])(
    'refuses by %j with a message that says what it takes',
    (by) => {
      const result = quotaDtoSchema().safeParse({
        type: 'API',
        name: 'n',
        restrictions: [{ api: '*', method: '*', by, type: 'concurrency', config: { connections: 1 } }],
      });
      expect(result.success).toBe(false);
      expect(problemsOf(result.error!.issues)).toEqual([
        'restrictions[0].by: must be client, or header: and an HTTP field name of at most 64 characters (header:X-Tenant)',
      ]);
    },
  );

  it('names every problem of a body at once, catalog references included', () => {
    const schema = quotaDtoSchema(() => catalogIds([{ id: 'A', methods: [{ id: 'M' }] }]));
    const result = schema.safeParse({
      type: 'API',
      name: '',
      extra: 1,
      restrictions: [
        { api: 'nope', method: 'M', type: 'throttle', config: { messages: 0, per: 1, period: 'day' } },
        { api: 'a', method: 'x', type: 'throttlemb', config: { mb: 1, messages: 1, per: 1, period: 'day' } },
        { api: '*', method: 'm', type: 'throttle', config: { messages: 1, per: 400, period: 'days' } },
      ],
    });
    expect(result.success).toBe(false);
    expect(problemsOf(result.error!.issues).sort()).toEqual(
      [
        'name: must be 1 to 200 characters',
        'extra: unknown field',
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
        "restrictions[0].api: no API of the catalog has id 'nope' (or use *); the APIs: 'A'",
        'restrictions[1].config.messages: not allowed for type throttlemb',
        "restrictions[1].method: API 'a' has no method with id 'x' (or use *); its methods: 'M'",
        'restrictions[2].config: the window (per × period) must not exceed 366 days',
        'restrictions[2].method: must be * when api is *',
      ].sort(),
    );
  });
});

describe('calendar windows in the quota schema', () => {
  const problems = (type: string, config: Record<string, unknown>): string[] => {
    const result = quotaDtoSchema().safeParse({
      type: 'API',
      name: 'n',
      restrictions: [{ api: '*', method: '*', type, config }],
    });
    return result.success ? [] : problemsOf(result.error.issues);
  };

  it('keeps a calendar window, its time zone and billing day, for every type with a window', () => {
    for (const [type, amount] of [
      ['throttle', { messages: 1000 }],
      ['throttlemb', { mb: 10 }],
      ['throttleunits', { units: 5, header: 'x-cost' }],
    ] as const) {
      const config = {
        ...amount,
        per: 1,
        period: 'month',
        window: 'calendar',
        timeZone: 'Europe/Berlin',
        startDay: 15,
      };
      const dto = quotaDtoSchema().parse({
        type: 'API',
        name: 'n',
        restrictions: [{ api: '*', method: '*', type, config }],
      });
      expect(dto.restrictions[0]!.config).toMatchObject({
        per: '1',
        period: 'month',
        window: 'calendar',
        timeZone: 'Europe/Berlin',
        startDay: 15,
      });
    }
  });

  it('answers a sliding window as Axway’s shape: no window field', () => {
    const dto = quotaDtoSchema().parse({
      type: 'API',
      name: 'n',
      restrictions: [
        {
          api: '*',
          method: '*',
          type: 'throttle',
          config: { messages: 1, per: 1, period: 'day', window: 'sliding' },
        },
      ],
    });
    expect(dto.restrictions[0]!.config).toEqual({ messages: '1', per: '1', period: 'day' });
  });

  it('refuses month and year on a sliding window, saying why', () => {
    expect(problems('throttle', { messages: 1, per: 1, period: 'month' })).toEqual([
      'restrictions[0].config.period: month is a calendar period: give window: calendar (a sliding month has no fixed length)',
    ]);
    expect(problems('throttle', { messages: 1, per: 1, period: 'years', window: 'sliding' })).toEqual([
      'restrictions[0].config.period: year is a calendar period: give window: calendar (a sliding year has no fixed length)',
    ]);
  });

  it('refuses a calendar window of more than one period, or of seconds', () => {
    expect(problems('throttle', { messages: 1, per: 2, period: 'day', window: 'calendar' })).toEqual([
      'restrictions[0].config.per: must be 1 for a calendar window: it is one day, week, month or year of the calendar',
    ]);
    expect(problems('throttle', { messages: 1, per: 1, period: 'hour', window: 'calendar' })).toEqual([
      'restrictions[0].config.period: must be one of day, week, month, year for a calendar window',
    ]);
  });

  it('refuses an unknown time zone, a billing day past the 28th or outside months, and both on a sliding window', () => {
    expect(
      problems('throttle', { messages: 1, per: 1, period: 'day', window: 'calendar', timeZone: 'Mars/Base' }),
    ).toEqual(['restrictions[0].config.timeZone: must be an IANA time zone (Europe/Berlin) or UTC']);
    expect(
      problems('throttle', { messages: 1, per: 1, period: 'month', window: 'calendar', startDay: 29 }),
    ).toEqual(['restrictions[0].config.startDay: must be a whole number from 1 to 28']);
    expect(
      problems('throttle', { messages: 1, per: 1, period: 'week', window: 'calendar', startDay: 3 }),
    ).toEqual(['restrictions[0].config.startDay: is allowed only with period: month']);
    expect(
      problems('throttle', { messages: 1, per: 1, period: 'day', timeZone: 'UTC', startDay: 2 }),
    ).toEqual([
      'restrictions[0].config.timeZone: is allowed only with window: calendar',
      'restrictions[0].config.startDay: is allowed only with window: calendar',
    ]);
  });

  it('refuses a window of any kind on a concurrency restriction', () => {
    expect(problems('concurrency', { connections: 3, window: 'calendar' })).toEqual([
      'restrictions[0].config.window: not allowed for type concurrency',
    ]);
  });

  it('stores a calendar restriction and reads it back byte for byte', () => {
    const text =
      '{"id":"3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f","type":"API","name":"n","description":"","restrictions":[{"api":"*","method":"*","type":"throttle","config":{"messages":"1000000","per":"1","period":"month","window":"calendar","timeZone":"America/New_York","startDay":28}}],"system":false}';
    const parsed = parseRecord(JSON.parse(text));
    if (!('record' in parsed)) throw new Error(parsed.problems.join('; '));
    expect(serializeRecord(parsed.record)).toBe(text);
  });
});
