import { describe, expect, it } from 'vitest';
import {
  getPetThrottle,
  otherApiMethodId,
  quotaDto,
  useQuotaApiGateway,
} from '../helpers/quota-api-client.js';
import { getPetMethodId, petsApiId } from '../helpers/test-gateway.js';

/** What a new user's near misses are told: the field, value or id they most likely meant, and where. */
describe('Quota API: messages that say what was meant', () => {
  const { call, errorsOf } = useQuotaApiGateway('memory');
  const messagesOf = async (body: unknown) => {
    const answer = await call('POST', '/quotas', { body });
    expect(answer.status).toBe(400);
    return errorsOf(answer).map((error) => error.message);
  };

  it.each([
    [
      'a misspelt field of a restriction',
      quotaDto({ restrictions: [getPetThrottle({ config: { mesages: 10, per: 1, period: 'second' } })] }),
      'restrictions[0].config.mesages: unknown field (did you mean messages?)',
    ],
    [
      'a misspelt field of the quota',
      { type: 'API', name: 'Pets', restriction: [] },
      'restriction: unknown field (did you mean restrictions?)',
    ],
    [
      'a quota type in another case',
      quotaDto({ type: 'Api' }),
      'type: must be one of APPLICATION, API (did you mean API?)',
    ],
    [
      'a misspelt restriction type',
      quotaDto({ restrictions: [getPetThrottle({ type: 'throtle' })] }),
      'restrictions[0].type: must be one of throttle, throttlemb, throttleunits, concurrency (did you mean throttle?)',
    ],
    [
      'a misspelt period',
      quotaDto({ restrictions: [getPetThrottle({ config: { messages: 1, per: 1, period: 'minuet' } })] }),
      'restrictions[0].config.period: must be one of second, seconds, minute, minutes, hour, hours, day, days, week, weeks, month, months, year, years (did you mean minute?)',
    ],
  ])('names what %s most likely meant', async (_case, body, message) => {
    expect(await messagesOf(body)).toContain(message);
  });

  it('says nothing it cannot stand behind: a field like no other is only unknown', async () => {
    expect(await messagesOf(quotaDto({ owner: 'me' }))).toContain('owner: unknown field');
  });

  describe('a method id the API does not have', () => {
    const refusedMethod = async (method: string, api = petsApiId) =>
      (await messagesOf(quotaDto({ restrictions: [getPetThrottle({ api, method })] }))).find((message) =>
        message.startsWith('restrictions[0].'),
      );
    const nearGetPet = `${getPetMethodId.slice(0, -1)}3`.toUpperCase();

    it('is echoed as it was given, with the id it most likely misspells', async () => {
      expect(await refusedMethod(nearGetPet)).toBe(
        `restrictions[0].method: API '${petsApiId}' has no method with id '${nearGetPet}' (or use *); did you mean '${getPetMethodId}' (getPet)?`,
      );
    });

    it('names the id of a method given by its name', async () => {
      expect(await refusedMethod('GetPet')).toBe(
        `restrictions[0].method: API '${petsApiId}' has no method with id 'GetPet' (or use *); did you mean '${getPetMethodId}' (getPet)?`,
      );
    });

    it('lists the methods of the API when no one is near', async () => {
      expect(await refusedMethod('Nope')).toBe(
        `restrictions[0].method: API '${petsApiId}' has no method with id 'Nope' (or use *); its methods: '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21' (listPets), '${getPetMethodId}' (getPet), '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f' (findByStatus), 'e7a3b5c9-0d14-4b2e-8f6a-9c1d3e5f7a43' (addPet)`,
      );
    });

    it('says which API a method of another API belongs to', async () => {
      expect(await refusedMethod(otherApiMethodId)).toBe(
        `restrictions[0].method: API '${petsApiId}' has no method with id '${otherApiMethodId}' (or use *); it is a method of API '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d' (Store)`,
      );
    });

    it('echoes an unknown API id as it was given, with the APIs there are', async () => {
      const api = 'Pet-Store';
      expect(await refusedMethod(getPetMethodId, api)).toBe(
        `restrictions[0].api: no API of the catalog has id '${api}' (or use *); did you mean '${petsApiId}' (Pet Store)?`,
      );
    });

    it('still takes ids in any case, and keeps them in lower case', async () => {
      const answer = await call('POST', '/quotas', {
        body: quotaDto({
          restrictions: [
            getPetThrottle({ api: petsApiId.toUpperCase(), method: getPetMethodId.toUpperCase() }),
          ],
        }),
      });
      expect(answer.status).toBe(201);
      expect((answer.body as { restrictions: unknown[] }).restrictions[0]).toMatchObject({
        api: petsApiId,
        method: getPetMethodId,
      });
    });
  });

  describe('a body that is not JSON', () => {
    it.each([
      [
        'a missing comma',
        '{\n  "type": "API",\n  "name": "Pets"\n  "restrictions": []\n}',
        "body: not valid JSON: expected ',' or '}' at line 4, column 3 (offset 38)",
      ],
      [
        'a body cut short',
        '{"type": "API",',
        'body: not valid JSON: it ends too soon at line 1, column 16 (offset 15)',
      ],
      [
        'a value that is no JSON value',
        '{"type": API}',
        'body: not valid JSON: expected a value at line 1, column 10 (offset 9)',
      ],
    ])('says where it stops being JSON: %s', async (_case, raw, message) => {
      const answer = await call('POST', '/quotas', { raw });
      expect(answer.status).toBe(400);
      expect(errorsOf(answer)).toEqual([{ code: 400, message }]);
    });

    it('tells a prototype key apart from a syntax error', async () => {
      const answer = await call('POST', '/quotas', {
        raw: '{"__proto__": {"polluted": true}, "type": "API", "name": "p", "restrictions": []}',
      });
      expect(errorsOf(answer)).toEqual([
        { code: 400, message: 'body: must not hold a __proto__ or constructor key' },
      ]);
    });
  });
});
