import { describe, expect, it } from 'vitest';
import { mobileAppId, quotaDto, useQuotaApiGateway } from '../helpers/quota-api-client.js';
import { applicationDefaultQuotaId, memberUser, systemQuotaId } from '../helpers/test-gateway.js';

describe.each(['memory', 'redis'] as const)(
  'Quota API: roles and the well-known quotas (%s store)',
  (storeType) => {
    const { call, errorsOf } = useQuotaApiGateway(storeType);

    describe('roles', () => {
      it('answers 401 with a Basic challenge without credentials or with wrong ones', async () => {
        const missing = await call('GET', '/quotas', { user: null });
        expect(missing.status).toBe(401);
        expect(missing.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
        expect(missing.body).toEqual({
          errors: [{ code: 401, message: 'admin credentials are missing or wrong' }],
        });
        expect((await call('GET', '/quotas', { user: { username: 'ann', password: 'wrong' } })).status).toBe(
          401,
        );
        expect((await call('GET', '/quotas', { user: { username: 'nobody', password: 'x' } })).status).toBe(
          401,
        );
      });

      it('lists every quota to an admin, and all but the System quota to a member', async () => {
        const asAdmin = (await call('GET', '/quotas')).body as Array<{ id: string }>;
        const asMember = (await call('GET', '/quotas', { user: memberUser })).body as Array<{ id: string }>;
        expect(asAdmin.map((quota) => quota.id)).toEqual(
          expect.arrayContaining([systemQuotaId, applicationDefaultQuotaId]),
        );
        expect(asMember.map((quota) => quota.id)).toContain(applicationDefaultQuotaId);
        expect(asMember.map((quota) => quota.id)).not.toContain(systemQuotaId);
      });

      it('lets a member read quotas but not the System quota (403)', async () => {
        expect((await call('GET', `/quotas/${applicationDefaultQuotaId}`, { user: memberUser })).status).toBe(
          200,
        );
        const system = await call('GET', `/quotas/${systemQuotaId}`, { user: memberUser });
        expect(system.status).toBe(403);
        expect(errorsOf(system)[0]!.code).toBe(403);
        expect((await call('GET', `/quotas/${systemQuotaId}`)).status).toBe(200);
      });

      it('refuses a member every write (403) and changes nothing', async () => {
        const before = (await call('GET', '/quotas')).body;
        expect((await call('POST', '/quotas', { user: memberUser, body: quotaDto() })).status).toBe(403);
        expect(
          (
            await call('PUT', `/quotas/${applicationDefaultQuotaId}`, {
              user: memberUser,
              body: quotaDto({ type: 'APPLICATION' }),
            })
          ).status,
        ).toBe(403);
        expect(
          (await call('DELETE', `/quotas/${applicationDefaultQuotaId}`, { user: memberUser })).status,
        ).toBe(403);
        expect(
          (await call('POST', `/applications/${mobileAppId}/quota`, { user: memberUser, body: quotaDto() }))
            .status,
        ).toBe(403);
        expect(
          (await call('DELETE', `/applications/${mobileAppId}/quota`, { user: memberUser })).status,
        ).toBe(403);
        expect((await call('GET', '/quotas')).body).toEqual(before);
      });

      it("lets a member read an application's quota (the console's Applications tab shows it)", async () => {
        const answer = await call('GET', `/applications/${mobileAppId}/quota`, { user: memberUser });
        expect(answer.status).toBe(200);
        expect(answer.body).toMatchObject({ id: applicationDefaultQuotaId, type: 'APPLICATION' });
      });
    });

    describe('the well-known quotas', () => {
      it('has System (API) and Application Default (APPLICATION) from the first start', async () => {
        expect((await call('GET', `/quotas/${systemQuotaId}`)).body).toMatchObject({
          id: systemQuotaId,
          name: 'System',
          type: 'API',
          system: true,
          restrictions: [],
        });
        expect((await call('GET', `/quotas/${applicationDefaultQuotaId}`)).body).toMatchObject({
          id: applicationDefaultQuotaId,
          type: 'APPLICATION',
          system: true,
        });
      });

      it('can update them but never delete them (403)', async () => {
        const updated = await call('PUT', `/quotas/${systemQuotaId}`, { body: quotaDto({ name: 'System' }) });
        expect(updated.status).toBe(200);
        expect(updated.body).toMatchObject({
          id: systemQuotaId,
          system: true,
          restrictions: [{ type: 'throttle' }],
        });
        expect((await call('DELETE', `/quotas/${systemQuotaId}`)).status).toBe(403);
        expect((await call('DELETE', `/quotas/${applicationDefaultQuotaId}`)).status).toBe(403);
        expect(
          (await call('PUT', `/quotas/${systemQuotaId}`, { body: quotaDto({ restrictions: [] }) })).status,
        ).toBe(200);
      });

      it('keeps the description of a well-known quota when a PUT sends none, and takes one it sends', async () => {
        const description = async (body: Record<string, unknown>) => {
          const answer = await call('PUT', `/quotas/${systemQuotaId}`, { body });
          expect(answer.status).toBe(200);
          return (answer.body as { description: string }).description;
        };
        const { description: _left, ...withoutDescription } = quotaDto({ name: 'System' });
        expect(await description(quotaDto({ description: 'All traffic' }))).toBe('All traffic');
        expect(await description(withoutDescription)).toBe('All traffic');
        expect(await description(quotaDto({ description: '' }))).toBe('');
      });

      it('keeps the type of a well-known quota', async () => {
        const answer = await call('PUT', `/quotas/${applicationDefaultQuotaId}`, {
          body: quotaDto({ type: 'API' }),
        });
        expect(answer.status).toBe(400);
        expect(errorsOf(answer)[0]!.message).toBe('type: must stay APPLICATION for this quota');
      });
    });
  },
);
