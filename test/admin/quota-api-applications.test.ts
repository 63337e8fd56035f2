import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { mobileAppId, quotaDto, useQuotaApiGateway } from '../helpers/quota-api-client.js';
import { applicationDefaultQuotaId } from '../helpers/test-gateway.js';

describe.each(['memory', 'redis'] as const)("Quota API: applications' own quotas (%s store)", (storeType) => {
  const { call, errorsOf } = useQuotaApiGateway(storeType);

  describe("applications' own quotas", () => {
    const path = `/applications/${mobileAppId}/quota`;

    it('gives the Application Default until the application has its own, and again after DELETE', async () => {
      expect((await call('GET', path)).body).toMatchObject({ id: applicationDefaultQuotaId });
      const created = await call('POST', path, {
        body: quotaDto({ type: 'APPLICATION', name: 'Mobile quota' }),
      });
      expect(created.status).toBe(201);
      const own = created.body as { id: string };
      expect(created.headers.get('location')).toBe(`/api/portal/v1.3/quotas/${own.id}`);
      expect((await call('GET', path)).body).toMatchObject({
        id: own.id,
        name: 'Mobile quota',
        system: false,
      });
      expect((await call('POST', path, { body: quotaDto({ type: 'APPLICATION' }) })).status).toBe(409);
      const updated = await call('PUT', path, { body: quotaDto({ type: 'APPLICATION', name: 'Mobile v2' }) });
      expect(updated.body).toMatchObject({ id: own.id, name: 'Mobile v2' });
      expect((await call('GET', `/quotas/${own.id}`)).body).toMatchObject({ name: 'Mobile v2' });
      expect((await call('DELETE', path)).status).toBe(204);
      expect((await call('GET', path)).body).toMatchObject({ id: applicationDefaultQuotaId });
      expect((await call('DELETE', path)).status).toBe(404);
      // PUT gives it one again, as Axway does (test/admin/axway-compat.test.ts).
      const again = await call('PUT', path, { body: quotaDto({ type: 'APPLICATION' }) });
      expect(again.status).toBe(201);
      expect(again.headers.get('location')).toBe(
        `/api/portal/v1.3/quotas/${(again.body as { id: string }).id}`,
      );
      expect(updated.headers.get('location')).toBeNull();
    });

    it('knows the project application and refuses unknown applications (404)', async () => {
      expect((await call('GET', '/applications/project/quota')).status).toBe(200);
      expect((await call('GET', `/applications/${randomUUID()}/quota`)).status).toBe(404);
    });

    it('requires type APPLICATION', async () => {
      const answer = await call('POST', path, { body: quotaDto({ type: 'API' }) });
      expect(answer.status).toBe(400);
      expect(errorsOf(answer)[0]!.message).toBe("type: must be APPLICATION for an application's quota");
    });
  });
});
