import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { getPetThrottle, quotaDto, useQuotaApiGateway } from '../helpers/quota-api-client.js';
import { getPetMethodId, petsApiId } from '../helpers/test-gateway.js';

describe.each(['memory', 'redis'] as const)(
  'Quota API: create, read, update, delete (%s store)',
  (storeType) => {
    const { call, errorsOf } = useQuotaApiGateway(storeType);

    describe('create, read, update, delete', () => {
      it('creates with 201, a server UUID, system false, Location and ETag; numbers come back as strings', async () => {
        const created = await call('POST', '/quotas', {
          body: quotaDto({
            id: 'client-id',
            system: true,
            restrictions: [
              getPetThrottle(),
              getPetThrottle({
                type: 'throttlemb',
                verb: 'GET',
                config: { mb: 1.5, per: 2, period: 'minute' },
              }),
            ],
          }),
        });
        expect(created.status).toBe(201);
        const quota = created.body as { id: string };
        expect(quota.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        expect(created.body).toEqual({
          id: quota.id,
          type: 'API',
          name: 'Pets',
          description: 'pets limit',
          restrictions: [
            {
              api: petsApiId,
              method: getPetMethodId,
              type: 'throttle',
              config: { messages: '10', per: '1', period: 'seconds' },
            },
            {
              api: petsApiId,
              method: getPetMethodId,
              verb: 'GET',
              type: 'throttlemb',
              config: { mb: '1.5', per: '2', period: 'minute' },
            },
          ],
          system: false,
        });
        expect(created.headers.get('location')).toBe(`/api/portal/v1.3/quotas/${quota.id}`);
        expect(created.headers.get('etag')).toMatch(/^"[0-9a-f]{40}"$/);
        const read = await call('GET', `/quotas/${quota.id}`);
        expect(read.body).toEqual(created.body);
        expect(read.headers.get('etag')).toBe(created.headers.get('etag'));
      });

      it("keeps a quota's own alert thresholds, and refuses thresholds out of order", async () => {
        const created = await call('POST', '/quotas', {
          body: quotaDto({ restrictions: [getPetThrottle()], thresholds: [50, 90] }),
        });
        expect(created.status).toBe(201);
        const { id } = created.body as { id: string };
        expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ thresholds: [50, 90] });
        const refused = await call('PUT', `/quotas/${id}`, {
          body: quotaDto({ restrictions: [getPetThrottle()], thresholds: [90, 50] }),
        });
        expect(refused.status).toBe(400);
        expect(errorsOf(refused)[0]!.message).toContain(
          'thresholds: must be an array of whole percentages from 1 to 100, each once, in ascending order',
        );
      });

      it('accepts * for api and method, several restrictions on one method, and a missing description', async () => {
        const created = await call('POST', '/quotas', {
          body: {
            type: 'API',
            name: 'everything',
            restrictions: [
              getPetThrottle({ api: '*', method: '*' }),
              getPetThrottle({ config: { messages: '1000', per: 1, period: 'day' } }),
            ],
          },
        });
        expect(created.status).toBe(201);
        expect(created.body).toMatchObject({
          description: '',
          restrictions: [{ api: '*', method: '*' }, { method: getPetMethodId }],
        });
      });

      it('updates with PUT: the body wins over the quota query parameter; id and system stay', async () => {
        const created = (await call('POST', '/quotas', { body: quotaDto() })).body as { id: string };
        const updated = await call(
          'PUT',
          `/quotas/${created.id}?quota=${encodeURIComponent(JSON.stringify({ name: 'from query' }))}`,
          {
            body: quotaDto({ id: 'other', system: true, name: 'from body' }),
          },
        );
        expect(updated.status).toBe(200);
        expect(updated.body).toMatchObject({ id: created.id, name: 'from body', system: false });
        expect((await call('GET', `/quotas/${created.id}`)).body).toMatchObject({ name: 'from body' });
      });

      it('deletes with 204, after which the quota is 404', async () => {
        const created = (await call('POST', '/quotas', { body: quotaDto() })).body as { id: string };
        const deleted = await call('DELETE', `/quotas/${created.id}`);
        expect(deleted.status).toBe(204);
        expect(deleted.body).toBeUndefined();
        expect((await call('GET', `/quotas/${created.id}`)).status).toBe(404);
      });

      it('answers 404 for an unknown id on GET, PUT and DELETE', async () => {
        const unknown = randomUUID();
        for (const [method, body] of [
          ['GET', undefined],
          ['PUT', quotaDto()],
          ['DELETE', undefined],
        ] as const) {
          const answer = await call(method, `/quotas/${unknown}`, { body });
          expect(answer.status, method).toBe(404);
          expect(errorsOf(answer)).toEqual([{ code: 404, message: `no quota with id '${unknown}'` }]);
        }
      });
    });

    describe('lost updates (ETag / If-Match)', () => {
      it('refuses PUT and DELETE with a stale If-Match (412) and accepts the current one', async () => {
        const created = await call('POST', '/quotas', { body: quotaDto() });
        const id = (created.body as { id: string }).id;
        const firstTag = created.headers.get('etag')!;
        const second = await call('PUT', `/quotas/${id}`, {
          body: quotaDto({ name: 'second' }),
          headers: { 'if-match': firstTag },
        });
        expect(second.status).toBe(200);
        const stale = await call('PUT', `/quotas/${id}`, {
          body: quotaDto({ name: 'lost' }),
          headers: { 'if-match': firstTag },
        });
        expect(stale.status).toBe(412);
        expect((await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': firstTag } })).status).toBe(
          412,
        );
        expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ name: 'second' });
        expect(
          (await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': second.headers.get('etag')! } }))
            .status,
        ).toBe(204);
      });

      it('treats If-Match: * as "any current version"', async () => {
        const id = ((await call('POST', '/quotas', { body: quotaDto() })).body as { id: string }).id;
        expect(
          (await call('PUT', `/quotas/${id}`, { body: quotaDto(), headers: { 'if-match': '*' } })).status,
        ).toBe(200);
      });

      it('never honours a weak If-Match tag, not even of the current version (412, strong comparison)', async () => {
        const created = await call('POST', '/quotas', { body: quotaDto() });
        const id = (created.body as { id: string }).id;
        const tag = created.headers.get('etag')!;
        for (const weak of [`W/${tag}`, `w/${tag}`, `W/${tag}, W/${tag}`]) {
          const put = await call('PUT', `/quotas/${id}`, {
            body: quotaDto({ name: 'weak' }),
            headers: { 'if-match': weak },
          });
          expect(put.status, weak).toBe(412);
          expect(errorsOf(put)[0]!.code).toBe(412);
          expect(
            (await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': weak } })).status,
            weak,
          ).toBe(412);
        }
        expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ name: 'Pets' });
      });

      it('honours an If-Match list when any member is the current tag', async () => {
        const created = await call('POST', '/quotas', { body: quotaDto() });
        const id = (created.body as { id: string }).id;
        let tag = created.headers.get('etag')!;
        const stale = `"${'0'.repeat(40)}"`;
        for (const listOf of [
          (current: string) => `${stale}, ${current}`,
          (current: string) => `${current}, ${stale}`,
          (current: string) => `${stale},${current}`,
          (current: string) => `W/${current}, ${current}`,
          (current: string) => ` ${stale} ,  ${current} `,
          (current: string) => `${stale}, "a,b", ${current}`,
          (current: string) => `${stale}, , ${current},`,
        ]) {
          const list = listOf(tag);
          const put = await call('PUT', `/quotas/${id}`, {
            body: quotaDto({ name: list }),
            headers: { 'if-match': list },
          });
          expect(put.status, list).toBe(200);
          tag = put.headers.get('etag')!;
        }
        expect(
          (await call('DELETE', `/quotas/${id}`, { headers: { 'if-match': `${stale}, ${tag}` } })).status,
        ).toBe(204);
      });

      it('refuses an If-Match list without the current tag, or a malformed one (412), and changes nothing', async () => {
        const created = await call('POST', '/quotas', { body: quotaDto() });
        const id = (created.body as { id: string }).id;
        const tag = created.headers.get('etag')!;
        const bare = tag.slice(1, -1);
        for (const value of [
          `"${'0'.repeat(40)}", "${'1'.repeat(40)}"`,
          `"${'0'.repeat(40)}", W/${tag}`,
          bare,
          `"${bare}`,
          `${bare}"`,
          `'${bare}'`,
          `"*"`,
          `*, ${tag}`,
          `"${bare}" junk`,
          `""`,
          ',',
          '',
        ]) {
          const put = await call('PUT', `/quotas/${id}`, {
            body: quotaDto({ name: 'lost' }),
            headers: { 'if-match': value },
          });
          expect(put.status, value).toBe(412);
        }
        expect((await call('GET', `/quotas/${id}`)).body).toMatchObject({ name: 'Pets' });
      });
    });
  },
);
