import { describe, expect, it } from 'vitest';
import { catalogOpenApi } from '../../src/admin/catalog-openapi.js';
import type { AuthDocumentation } from '../../src/auth/authenticator.js';
import type { Config } from '../../src/config/schema.js';
import {
  apiName,
  catalogFromOpenApi,
  fillPath,
  missingParameters,
  methodName,
  parseHeaderLines,
} from '../../src/console/logic/catalog.js';
import { busiestFirst } from '../../src/console/logic/busiest-first.js';
import { nextRefreshMs } from '../../src/console/logic/refresh.js';
import { amountText, durationText, fillOf, windowText } from '../../src/console/logic/format.js';
import {
  dtoOf,
  fieldNames,
  formOf,
  messagesByField,
  newRestriction,
  type QuotaAnswer,
  type RestrictionForm,
} from '../../src/console/logic/quota-form.js';
import {
  byText,
  callersText,
  countedText,
  limitText,
  modeBadge,
  scopeText,
} from '../../src/console/logic/restriction-text.js';
import { sparklinePoints } from '../../src/console/logic/sparkline.js';
import { getPetMethodId, petsApiId, petsConfig } from '../helpers/test-gateway.js';

/** The console's own logic, without a browser: what it reads from the API and what it sends back. */

const noAuth: AuthDocumentation = {
  swaggerSecurity: () => ({ securityDefinitions: {}, security: [] }),
} as unknown as AuthDocumentation;

function catalog() {
  const config = petsConfig('http://127.0.0.1:9/pets') as unknown as Config;
  return catalogFromOpenApi(catalogOpenApi({ ...config, tls: undefined } as Config, noAuth));
}

describe('the catalog, read from the gateway’s own OpenAPI document', () => {
  it('lists the APIs with their methods by name, verb, path and parameters, and the scheme', () => {
    const read = catalog();
    expect(read.authType).toBe('basic');
    expect(read.apis).toHaveLength(1);
    expect(read.apis[0]!.name).toBe('Pet Store');
    expect(read.apis[0]!.methods.find((method) => method.id === getPetMethodId)).toEqual({
      id: getPetMethodId,
      name: 'getPet',
      verb: 'GET',
      path: '/pets/{petId}',
      description: '',
      parameters: ['petId'],
      protocol: 'http',
      authType: 'basic',
    });
    expect(read.server).toBe('http://127.0.0.1:0');
    expect(apiName(read, petsApiId.toUpperCase())).toBe('Pet Store');
    expect(methodName(read, petsApiId, getPetMethodId)).toBe('getPet');
    expect(apiName(read, '*')).toBe('every API');
    expect(apiName(read, 'gone')).toBe('gone');
  });

  it('says which methods are called over gRPC or as a WebSocket, where a plain HTTP request does not do', () => {
    const config = petsConfig('http://127.0.0.1:9/pets') as unknown as Config;
    const [pets] = config.apis;
    const read = catalogFromOpenApi(
      catalogOpenApi(
        {
          ...config,
          tls: undefined,
          apis: [
            {
              ...pets!,
              methods: pets!.methods.map((method) => ({ ...method, websocket: method.name === 'listPets' })),
            },
            {
              ...pets!,
              id: 'grpc',
              basePath: '/helloworld.Greeter',
              protocol: 'grpc',
              methods: [{ ...pets!.methods[3]!, id: 'hello', name: 'SayHello', path: '/SayHello' }],
            },
          ],
        } as Config,
        noAuth,
      ),
    );
    const protocols = read.apis.flatMap((api) => api.methods.map((method) => [method.name, method.protocol]));
    expect(protocols).toEqual([
      ['listPets', 'websocket'],
      ['addPet', 'http'],
      ['getPet', 'http'],
      ['findByStatus', 'http'],
      ['SayHello', 'grpc'],
    ]);
  });

  it('names the path parameters left empty or blank, which a request cannot do without', () => {
    expect(missingParameters('/pets/{petId}/toys/{toyId}', { petId: '', toyId: '7' })).toEqual(['petId']);
    expect(missingParameters('/pets/{petId}', { petId: ' \t' })).toEqual(['petId']);
    expect(missingParameters('/pets/{petId}', {})).toEqual(['petId']);
    expect(missingParameters('/pets/{petId}', { petId: '0' })).toEqual([]);
  });

  it('fills path parameters percent-encoded, so a value cannot add segments', () => {
    expect(fillPath('/pets/{petId}', { petId: '../admin?x' }, '?a=1')).toBe('/pets/..%2Fadmin%3Fx?a=1');
    expect(fillPath('/pets/', {}, '')).toBe('/pets/');
  });

  it('reads header lines and names the line of a mistake', () => {
    expect(parseHeaderLines('Accept: application/json\n\nX-Trace:  a:b ')).toEqual({
      headers: { Accept: 'application/json', 'X-Trace': 'a:b' },
      mistakes: [],
    });
    expect(parseHeaderLines('no colon here\nBad Name: x').mistakes).toEqual([
      'line 1: write a header as Name: value',
      'line 2: write a header as Name: value',
    ]);
  });
});

describe('words and numbers', () => {
  it('says windows, waits and amounts as people do', () => {
    expect(windowText(60)).toBe('1 minute');
    expect(windowText(90)).toBe('90 seconds');
    expect(windowText(7_200)).toBe('2 hours');
    expect(windowText(604_800)).toBe('1 week');
    expect(durationText(0)).toBe('now');
    expect(durationText(0.2)).toBe('1 s');
    expect(durationText(75)).toBe('1 min 15 s');
    expect(durationText(3_700)).toBe('1 h 1 min');
    expect(durationText(90_000)).toBe('1 d 1 h');
    expect(durationText(86_400)).toBe('1 d');
    expect(amountText(1, 'messages')).toBe('1 message');
    expect(amountText(12_345, 'messages')).toBe('12,345 messages');
    expect(amountText(512, 'bytes')).toBe('512 bytes');
    expect(amountText(1_572_864, 'bytes')).toBe('1.5 MB');
  });

  it('fills a bar up to its limit, amber from 80 %, red when full', () => {
    expect(fillOf(0, 10)).toEqual({ percent: 0, level: 'ok' });
    expect(fillOf(8, 10)).toEqual({ percent: 80, level: 'high' });
    expect(fillOf(12, 10)).toEqual({ percent: 100, level: 'full' });
    expect(fillOf(3, 0)).toEqual({ percent: 0, level: 'ok' });
  });

  it('lists the busiest applications first, and counts those beyond the bars shown', () => {
    const entries = [3, 9, 1, 7].map((used, i) => ({ name: `app${i}`, used }));
    expect(busiestFirst(entries)).toEqual([entries[1], entries[3], entries[0], entries[2]]);
    expect(busiestFirst(entries, 2)).toEqual([entries[1], entries[3], { more: 2 }]);
  });

  it('refreshes every 3 s, or so that a slow refresh keeps the store busy a tenth of the time at most', () => {
    expect(nextRefreshMs(40)).toBe(3_000);
    expect(nextRefreshMs(300)).toBe(3_000);
    expect(nextRefreshMs(1_000)).toBe(10_000);
  });

  it('draws a sparkline whose highest count touches the top and whose zeros lie on the bottom', () => {
    expect(sparklinePoints([0, 2, 4], 100, 20)).toBe('0,20 50,10 100,0');
    expect(sparklinePoints([0, 0], 10, 20)).toBe('0,20 10,20');
    expect(sparklinePoints([], 10, 20)).toBe('');
  });
});

const quota: QuotaAnswer = {
  id: '0f6a3c1e-9b2d-4c8e-a1f0-3d5b7c9e1a2b',
  type: 'API',
  name: 'Pets',
  description: 'Reads',
  system: false,
  restrictions: [
    {
      api: petsApiId,
      method: getPetMethodId,
      verb: 'GET',
      type: 'throttle',
      config: { messages: '1000', per: '1', period: 'minutes' },
    },
    {
      api: '*',
      method: '*',
      mode: 'shadow',
      by: 'header:x-tenant',
      type: 'throttlemb',
      config: { mb: '2.5', per: '7', period: 'day' },
    },
  ],
};

describe('the quota form', () => {
  it('turns a quota into the form and back into the QuotaDTO it was', () => {
    const form = formOf(quota);
    expect(form.restrictions[0]).toEqual({
      api: petsApiId,
      method: getPetMethodId,
      verb: 'GET',
      type: 'throttle',
      mode: 'enforce',
      by: '',
      amount: '1000',
      per: '1',
      period: 'minute',
      window: 'sliding',
      timeZone: '',
      startDay: '',
      header: '',
      body: '',
      fallback: '',
    });
    expect(dtoOf(form)).toEqual({
      type: 'API',
      name: 'Pets',
      description: 'Reads',
      restrictions: [
        {
          api: petsApiId,
          method: getPetMethodId,
          verb: 'GET',
          type: 'throttle',
          config: { messages: '1000', per: '1', period: 'minute' },
        },
        {
          api: '*',
          method: '*',
          mode: 'shadow',
          by: 'header:x-tenant',
          type: 'throttlemb',
          config: { mb: '2.5', per: '7', period: 'day' },
        },
      ],
    });
  });

  it('sends every method under every API, and no verb for "every verb"', () => {
    const restriction = { ...newRestriction(), method: getPetMethodId, amount: ' 5 ' };
    expect(dtoOf({ name: ' x ', type: 'API', description: '', restrictions: [restriction] })).toEqual({
      type: 'API',
      name: 'x',
      description: '',
      restrictions: [
        { api: '*', method: '*', type: 'throttle', config: { messages: '5', per: '1', period: 'minute' } },
      ],
    });
  });

  it("puts each of the admin API's messages next to the field it names", () => {
    const form = formOf(quota);
    const { byField, general } = messagesByField(
      [
        'name: must be 1 to 200 characters',
        'restrictions[0].config.messages: must be a whole number from 1 to 1000000000000',
        'restrictions[1].config.mb: must be a number of megabytes',
        'restrictions[1].config: the window (per × period) must not exceed 366 days',
        "restrictions[0].method: API 'x' has no method with id 'y' (or use *)",
        'restrictions[1].mode: must be one of enforce, shadow',
        'restrictions[7].api: beyond the form',
        'the quota store is unavailable',
      ],
      fieldNames(form),
    );
    expect(Object.fromEntries(byField)).toEqual({
      name: ['must be 1 to 200 characters'],
      'restrictions[0].config.amount': ['must be a whole number from 1 to 1000000000000'],
      'restrictions[1].config.amount': ['must be a number of megabytes'],
      'restrictions[1].config.per': ['the window (per × period) must not exceed 366 days'],
      'restrictions[0].method': ["API 'x' has no method with id 'y' (or use *)"],
      'restrictions[1].mode': ['must be one of enforce, shadow'],
    });
    expect(general).toEqual(['restrictions[7].api: beyond the form', 'the quota store is unavailable']);
  });

  it('edits a throttleunits restriction: its units, the field it reads and its default', () => {
    const units = {
      api: '*',
      method: '*',
      type: 'throttleunits' as const,
      config: { units: '10000', per: '1', period: 'day', header: 'x-tokens', default: '5' },
    };
    const form = formOf({ ...quota, restrictions: [units] });
    expect(form.restrictions[0]).toMatchObject({ amount: '10000', header: 'x-tokens', fallback: '5' });
    expect(dtoOf(form).restrictions).toEqual([units]);
    expect(
      dtoOf({ ...form, restrictions: [{ ...form.restrictions[0]!, fallback: ' ' }] }).restrictions,
    ).toEqual([{ ...units, config: { units: '10000', per: '1', period: 'day', header: 'x-tokens' } }]);
    expect(limitText(units)).toBe('10,000 units (x-tokens) per 1 day');
    expect(amountText(1, 'units')).toBe('1 unit');
    const { byField } = messagesByField(
      [
        'restrictions[0].config.units: must be a whole number from 1 to 999999999999999',
        'restrictions[0].config.header: is required unless body is given',
        'restrictions[0].config.body: [1]: must be property names (letters, digits, _ and -) joined by dots, like usage.total_tokens',
        'restrictions[0].config.default: must be a whole number from 0 to 999999999999999',
      ],
      fieldNames(form),
    );
    expect(Object.fromEntries(byField)).toEqual({
      'restrictions[0].config.amount': ['must be a whole number from 1 to 999999999999999'],
      'restrictions[0].config.header': ['is required unless body is given'],
      'restrictions[0].config.body': [
        '[1]: must be property names (letters, digits, _ and -) joined by dots, like usage.total_tokens',
      ],
      'restrictions[0].config.fallback': ['must be a whole number from 0 to 999999999999999'],
    });
  });

  it('edits the body paths of a throttleunits restriction: one path, a list, or none beside a header', () => {
    const units = (config: Record<string, unknown>) => ({
      api: '*',
      method: '*',
      type: 'throttleunits' as const,
      config: { units: '1000000', per: '1', period: 'day', ...config },
    });
    const anthropic = units({ body: ['message.usage.input_tokens', 'usage.output_tokens'], default: '500' });
    const form = formOf({ ...quota, restrictions: [anthropic] });
    expect(form.restrictions[0]).toMatchObject({
      header: '',
      body: 'message.usage.input_tokens, usage.output_tokens',
      fallback: '500',
    });
    expect(dtoOf(form).restrictions).toEqual([anthropic]);
    expect(limitText(anthropic)).toBe(
      '1,000,000 units (message.usage.input_tokens + usage.output_tokens) per 1 day',
    );
    const edited = (changes: Partial<RestrictionForm>) =>
      dtoOf({ ...form, restrictions: [{ ...form.restrictions[0]!, ...changes }] }).restrictions;
    expect(edited({ body: ' usage.total_tokens ,, ' })).toEqual([
      units({ body: 'usage.total_tokens', default: '500' }),
    ]);
    expect(edited({ header: 'x-tokens', body: ' ', fallback: '' })).toEqual([units({ header: 'x-tokens' })]);
    // Neither: the admin API says what is missing, next to the header field.
    expect(edited({ body: '', fallback: '' })).toEqual([units({})]);
    expect(limitText(units({ header: 'x-tokens', body: 'usage.total_tokens' }))).toBe(
      '1,000,000 units (x-tokens, else usage.total_tokens) per 1 day',
    );
  });

  it('edits a concurrency restriction: its requests in flight, and no window', () => {
    const inFlight = { api: '*', method: '*', type: 'concurrency' as const, config: { connections: '5' } };
    const form = formOf({ ...quota, restrictions: [inFlight] });
    expect(form.restrictions[0]).toMatchObject({ amount: '5', per: '1', period: 'minute' });
    expect(dtoOf(form).restrictions).toEqual([inFlight]);
    // Switched to messages, the restriction gets the window the form kept.
    expect(
      dtoOf({ ...form, restrictions: [{ ...form.restrictions[0]!, type: 'throttle' }] }).restrictions,
    ).toEqual([
      { api: '*', method: '*', type: 'throttle', config: { messages: '5', per: '1', period: 'minute' } },
    ]);
    expect(limitText(inFlight)).toBe('5 requests in flight at once');
    expect(amountText(1, 'concurrent-requests')).toBe('1 request in flight');
    const { byField } = messagesByField(
      ['restrictions[0].config.connections: must be a whole number from 1 to 1000000'],
      fieldNames(form),
    );
    expect([...byField.keys()]).toEqual(['restrictions[0].config.amount']);
  });

  it('says a restriction in words, with names from the catalog', () => {
    const read = catalog();
    expect(limitText(quota.restrictions[0]!)).toBe('1,000 messages per 1 minute');
    expect(limitText(quota.restrictions[1]!)).toBe('2.5 MB per 7 days');
    expect(scopeText(quota.restrictions[0]!, read)).toBe('Pet Store › getPet · GET only');
    expect(scopeText(quota.restrictions[1]!, read)).toBe('every API');
    expect(modeBadge(quota.restrictions[0]!)).toBeNull();
    expect(modeBadge(quota.restrictions[1]!)).toMatchObject({ text: 'shadow' });
  });

  it('says whose count each count of a restriction counted by caller is, and whose count its bar shows', () => {
    const read = catalog();
    expect(byText(quota.restrictions[0]!)).toBeNull();
    expect(byText({ by: 'client' })).toBe('per client address');
    expect(byText(quota.restrictions[1]!)).toBe('per value of x-tenant');
    expect(countedText(quota.restrictions[0]!, read)).toBe('Pet Store › getPet · GET only');
    expect(countedText(quota.restrictions[1]!, read)).toBe('every API, per value of x-tenant');
    expect([0, 1, 12_000].map(callersText)).toEqual([
      'no caller counted yet',
      'the only caller counted',
      'the busiest of 12,000 callers counted',
    ]);
  });
});
