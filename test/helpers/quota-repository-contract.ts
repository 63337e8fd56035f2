import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  applicationDefaultQuotaId,
  systemQuotaId,
  type Quota,
  type StoredQuota,
} from '../../src/quota/model.js';
import { membershipRecord } from '../../src/quota/plans.js';
import { etagOf, serializeRecord } from '../../src/quota/stored-records.js';
import {
  QuotaConflict,
  QuotaNotFound,
  QuotaPreconditionFailed,
  type QuotaRepository,
} from '../../src/quota/quota-repository.js';

/** A repository under test, and a way to open a second one on the same storage. */
export interface RepositoryFixture {
  repository: QuotaRepository;
  reopen(): Promise<QuotaRepository>;
  close(): Promise<void>;
}

let counter = 0;
export function sampleQuota(overrides: Partial<Quota> = {}): Quota {
  counter += 1;
  return {
    id: `11111111-2222-4333-8444-${String(counter).padStart(12, '0')}`,
    type: 'API',
    name: `Quota ${counter}`,
    description: '',
    restrictions: [
      { api: '*', method: '*', type: 'throttle', config: { messages: '10', per: '1', period: 'second' } },
    ],
    system: false,
    ...overrides,
  };
}

/** The behaviour every QuotaRepository must show; run once per implementation. */
export function describeQuotaRepositoryContract(name: string, open: () => Promise<RepositoryFixture>): void {
  describe(`QuotaRepository contract: ${name}`, () => {
    const withRepository = (test: (fixture: RepositoryFixture) => Promise<void>) => async () => {
      const fixture = await open();
      try {
        await test(fixture);
      } finally {
        await fixture.close();
      }
    };

    it(
      'starts with the System and Application Default quotas, without restrictions',
      withRepository(async ({ repository }) => {
        expect(repository.get(systemQuotaId)?.quota).toMatchObject({
          type: 'API',
          name: 'System',
          system: true,
          restrictions: [],
        });
        expect(repository.get(applicationDefaultQuotaId)?.quota).toMatchObject({
          type: 'APPLICATION',
          system: true,
          restrictions: [],
        });
      }),
    );

    it(
      'creates a quota that get and all return, with the ETag of its stored form',
      withRepository(async ({ repository }) => {
        const quota = sampleQuota();
        const created = await repository.create({ quota });
        expect(created.etag).toBe(etagOf(serializeRecord({ quota })));
        expect(repository.get(quota.id)).toEqual(created);
        expect(repository.all().map((record) => record.quota.id)).toContain(quota.id);
      }),
    );

    it(
      'keeps one quota per application and finds it by application',
      withRepository(async ({ repository }) => {
        const quota = sampleQuota({ type: 'APPLICATION' });
        await repository.create({ quota, application: 'mobile' });
        expect(repository.ofApplication('mobile')?.quota.id).toBe(quota.id);
        await expect(
          repository.create({ quota: sampleQuota({ type: 'APPLICATION' }), application: 'mobile' }),
        ).rejects.toBeInstanceOf(QuotaConflict);
      }),
    );

    it(
      'replaces a quota, keeping its application, and refuses a stale If-Match',
      withRepository(async ({ repository }) => {
        const quota = sampleQuota({ type: 'APPLICATION' });
        const created = await repository.create({ quota, application: 'web' });
        const replaced = await repository.replace({ quota: { ...quota, name: 'renamed' } }, created.etag);
        expect(replaced.application).toBe('web');
        expect(replaced.etag).not.toBe(created.etag);
        expect(repository.get(quota.id)?.quota.name).toBe('renamed');
        await expect(
          repository.replace({ quota: { ...quota, name: 'lost update' } }, created.etag),
        ).rejects.toBeInstanceOf(QuotaPreconditionFailed);
        expect(repository.get(quota.id)?.quota.name).toBe('renamed');
        await expect(repository.replace({ quota: sampleQuota() })).rejects.toBeInstanceOf(QuotaNotFound);
      }),
    );

    it(
      'removes a quota and frees its application, refusing a stale If-Match',
      withRepository(async ({ repository }) => {
        const quota = sampleQuota({ type: 'APPLICATION' });
        const created = await repository.create({ quota, application: 'tv' });
        await repository.replace({ quota: { ...quota, name: 'changed' } });
        await expect(repository.remove(quota.id, created.etag)).rejects.toBeInstanceOf(
          QuotaPreconditionFailed,
        );
        await repository.remove(quota.id);
        expect(repository.get(quota.id)).toBeUndefined();
        expect(repository.ofApplication('tv')).toBeUndefined();
        await expect(repository.remove(quota.id)).rejects.toBeInstanceOf(QuotaNotFound);
        await repository.create({ quota: sampleQuota({ type: 'APPLICATION' }), application: 'tv' });
      }),
    );

    it(
      'keeps the rules of plans: a membership names a plan, and a plan in use is neither deleted nor made into another type',
      withRepository(async ({ repository, reopen }) => {
        const plan = sampleQuota({ type: 'APPLICATION', name: 'Gold' });
        const apiQuota = sampleQuota();
        await repository.create({ quota: plan });
        await repository.create({ quota: apiQuota });
        const membership = await repository.create(membershipRecord(randomUUID(), 'gold-app', plan.id));
        await repository.create(membershipRecord(randomUUID(), 'silver-app', plan.id));
        expect(repository.ofApplication('gold-app')).toMatchObject({
          plan: plan.id,
          application: 'gold-app',
        });

        for (const notAPlan of [apiQuota.id, applicationDefaultQuotaId, membership.quota.id, randomUUID()]) {
          await expect(
            repository.create(membershipRecord(randomUUID(), 'bronze-app', notAPlan)),
          ).rejects.toBeInstanceOf(QuotaConflict);
        }
        expect(repository.ofApplication('bronze-app')).toBeUndefined();

        const inUse = /is a plan that 2 applications are on/;
        await expect(repository.remove(plan.id)).rejects.toThrow(inUse);
        await expect(repository.replace({ quota: { ...plan, type: 'API' } })).rejects.toThrow(inUse);
        expect(repository.get(plan.id)?.quota.type).toBe('APPLICATION');
        await repository.replace({ quota: { ...plan, name: 'Gold v2' } });

        // Off the plan (an own quota in its place), then gone: the plan is free to go.
        await repository.replace({ quota: sampleQuota({ type: 'APPLICATION', id: membership.quota.id }) });
        expect(repository.ofApplication('gold-app')?.plan).toBeUndefined();
        await expect(repository.remove(plan.id)).rejects.toThrow(/is a plan that 1 application is on/);
        const next = await reopen();
        try {
          expect(next.ofApplication('silver-app')).toMatchObject({ plan: plan.id });
        } finally {
          await next.close();
        }
        await repository.remove(repository.ofApplication('silver-app')!.quota.id);
        await repository.remove(plan.id);
        expect(repository.get(plan.id)).toBeUndefined();
      }),
    );

    it(
      'writes a batch whole, judging the rules of plans on the set it leaves: a plan retyped before its application moves off it',
      withRepository(async ({ repository, reopen }) => {
        const gold = await repository.create({ quota: sampleQuota({ type: 'APPLICATION', name: 'Gold' }) });
        const silver = sampleQuota({ type: 'APPLICATION', name: 'Silver' });
        const member = await repository.create(membershipRecord(randomUUID(), 'gold-app', gold.quota.id));
        await repository.writeAll([
          { record: { quota: { ...gold.quota, type: 'API' } }, etag: gold.etag },
          { record: { quota: silver } },
          { record: membershipRecord(member.quota.id, 'gold-app', silver.id), etag: member.etag },
        ]);
        const next = await reopen();
        try {
          for (const seen of [repository, next]) {
            expect(seen.get(gold.quota.id)?.quota.type).toBe('API');
            expect(seen.ofApplication('gold-app')).toMatchObject({ plan: silver.id });
          }
        } finally {
          await next.close();
        }
      }),
    );

    it(
      'writes nothing of a batch one write of which it refuses: a stale ETag, an id taken, a second quota, a plan left with its application',
      withRepository(async ({ repository, reopen }) => {
        const kept = await repository.create({ quota: sampleQuota() });
        await repository.replace({ quota: { ...kept.quota, name: 'changed since' } });
        const plan = await repository.create({ quota: sampleQuota({ type: 'APPLICATION' }) });
        await repository.create(membershipRecord(randomUUID(), 'stays', plan.quota.id));
        await repository.create({ quota: sampleQuota({ type: 'APPLICATION' }), application: 'owner' });
        const fresh = sampleQuota();
        const refused: Array<[Parameters<QuotaRepository['writeAll']>[0][number], unknown]> = [
          [{ record: { quota: { ...kept.quota, name: 'lost' } }, etag: kept.etag }, QuotaPreconditionFailed],
          [{ record: { quota: kept.quota } }, QuotaPreconditionFailed],
          [{ record: { quota: sampleQuota({ type: 'APPLICATION' }), application: 'owner' } }, QuotaConflict],
          [
            { record: { quota: { ...plan.quota, type: 'API' } }, etag: plan.etag },
            /is a plan that 1 application is on \('stays'\)/,
          ],
        ];
        for (const [write, refusal] of refused) {
          const batch = repository.writeAll([{ record: { quota: fresh } }, write]);
          if (refusal instanceof RegExp) await expect(batch).rejects.toThrow(refusal);
          else await expect(batch).rejects.toBeInstanceOf(refusal);
        }
        const next = await reopen();
        try {
          for (const seen of [repository, next]) {
            expect(seen.get(fresh.id)).toBeUndefined();
            expect(seen.get(kept.quota.id)?.quota.name).toBe('changed since');
            expect(seen.get(plan.quota.id)?.quota.type).toBe('APPLICATION');
          }
        } finally {
          await next.close();
        }
      }),
    );

    it(
      'tells its listeners the whole set after each change',
      withRepository(async ({ repository }) => {
        const seen: StoredQuota[][] = [];
        repository.onChange((quotas) => seen.push(quotas));
        const quota = sampleQuota();
        await repository.create({ quota });
        await expect.poll(() => seen.at(-1)?.some((record) => record.quota.id === quota.id)).toBe(true);
        await repository.remove(quota.id);
        await expect.poll(() => seen.at(-1)?.some((record) => record.quota.id === quota.id)).toBe(false);
      }),
    );

    it(
      'keeps every acknowledged write for the next process',
      withRepository(async ({ repository, reopen }) => {
        const kept = sampleQuota();
        const removed = sampleQuota({ type: 'APPLICATION' });
        await repository.create({ quota: kept });
        await repository.create({ quota: removed, application: 'gone' });
        await repository.replace({ quota: { ...kept, description: 'second version' } });
        await repository.remove(removed.id);
        const next = await reopen();
        try {
          expect(next.get(kept.id)?.quota.description).toBe('second version');
          expect(next.get(removed.id)).toBeUndefined();
          expect(next.ofApplication('gone')).toBeUndefined();
          expect(next.get(systemQuotaId)).toBeDefined();
        } finally {
          await next.close();
        }
      }),
    );

    it(
      "raises an application's reset generations, tells the listeners, and keeps them across a reopen",
      withRepository(async ({ repository, reopen }) => {
        const heard: number[] = [];
        repository.onChange(() => heard.push(repository.resets().get('app-a')?.get('q:0:a:app:') ?? 0));
        await repository.reset('app-a', ['q:0:a:app:', 'q:0:b:app:']);
        await repository.reset('app-a', ['q:0:a:app:']);
        const generations = (resets: ReturnType<QuotaRepository['resets']>, application: string) =>
          Object.fromEntries(resets.get(application) ?? []);
        expect(generations(repository.resets(), 'app-a')).toEqual({ 'q:0:a:app:': 2, 'q:0:b:app:': 1 });
        expect(repository.resets().has('app-b')).toBe(false);
        expect(heard.slice(0, 2)).toEqual([1, 2]);
        // A quota write keeps them.
        await repository.create({ quota: sampleQuota() });
        expect(generations(repository.resets(), 'app-a')).toEqual({ 'q:0:a:app:': 2, 'q:0:b:app:': 1 });
        const reopened = await reopen();
        try {
          expect(generations(reopened.resets(), 'app-a')).toEqual({ 'q:0:a:app:': 2, 'q:0:b:app:': 1 });
        } finally {
          await reopened.close();
        }
      }),
    );
  });
}
