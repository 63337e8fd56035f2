import { describe, expect, it } from 'vitest';
import {
  applicationDefaultQuotaId,
  systemQuotaId,
  type Quota,
  type StoredQuota,
} from '../../src/quota/model.js';
import { QuotaIndex } from '../../src/quota/quota-index.js';

const petStore = '5f1c7f8e-2b6a-4d38-9a1e-0c3f4b8d2a10';
const getPet = 'c4d2a9e3-71b8-4c6f-9e0d-2a5b8f1c3d32';
const addPet = '9a0c1b2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d';

type RestrictionInput = Quota['restrictions'][number];

const throttle = (api: string, method: string, messages: string, verb?: string): RestrictionInput => ({
  api,
  method,
  ...(verb ? { verb: verb as RestrictionInput['verb'] } : {}),
  type: 'throttle',
  config: { messages, per: '1', period: 'minute' },
});
const throttlemb = (api: string, method: string, mb: string): RestrictionInput => ({
  api,
  method,
  type: 'throttlemb',
  config: { mb, per: '1', period: 'hour' },
});

function stored(
  id: string,
  type: Quota['type'],
  restrictions: RestrictionInput[],
  application?: string,
): StoredQuota {
  return {
    quota: { id, type, name: id, description: '', restrictions, system: id.startsWith('00000000') },
    ...(application ? { application } : {}),
    etag: `"${id}"`,
  };
}

const definitions = () =>
  new QuotaIndex([
    stored(systemQuotaId, 'API', [
      throttle('*', '*', '1000'),
      throttle(petStore, getPet, '10'),
      throttle(petStore, '*', '50', 'POST'),
      throttlemb('*', '*', '1'),
    ]),
    stored(applicationDefaultQuotaId, 'APPLICATION', [throttle('*', '*', '5')]),
    stored(
      '22222222-3333-4444-8555-666666666666',
      'APPLICATION',
      [throttle(petStore, addPet, '2')],
      'gold-app',
    ),
  ]);

describe('QuotaIndex checks', () => {
  it('selects the API-wide restrictions that match the api, method and verb', () => {
    const checks = definitions().checksFor(petStore, getPet, 'GET', undefined);
    expect(checks.restrictions.map((restriction) => [restriction.index, restriction.limit])).toEqual([
      [0, 1000],
      [1, 10],
      [3, 1_048_576],
    ]);
    const post = definitions().checksFor(petStore, addPet, 'POST', undefined);
    expect(post.restrictions.map((restriction) => restriction.index)).toEqual([0, 2, 3]);
  });

  it('matches catalog ids in any case, as the router spells them', () => {
    const checks = definitions().checksFor(petStore.toUpperCase(), getPet.toUpperCase(), 'GET', undefined);
    expect(checks.restrictions.map((restriction) => restriction.index)).toEqual([0, 1, 3]);
  });

  it('hands every request of the same api, method, verb and application the same checks and the same bodiless checks', () => {
    const index = definitions();
    const first = index.checksFor(petStore, getPet, 'GET', 'app-a');
    expect(index.checksFor(petStore, getPet, 'GET', 'app-a')).toBe(first);
    expect(first.specs(0)).toBe(first.specs(0));
    expect(index.checksFor(petStore, getPet, 'GET', undefined)).toBe(
      index.checksFor(petStore, getPet, 'GET', undefined),
    );
    expect(index.checksFor(petStore, getPet, 'GET', 'app-b')).not.toBe(first);
  });

  it('charges a message per throttle and the declared body per throttlemb, needing room for a byte', () => {
    const checks = definitions().checksFor(petStore, getPet, 'GET', undefined);
    expect(checks.specs(0).map(({ cost, need }) => [cost, need])).toEqual([
      [1, 1],
      [1, 1],
      [0, 1],
    ]);
    expect(checks.specs(300).map(({ cost, need }) => [cost, need])).toEqual([
      [1, 1],
      [1, 1],
      [300, 300],
    ]);
    expect(checks.byteRestrictions.map((restriction) => restriction.index)).toEqual([3]);
    expect(checks.largestBody).toBe(1_048_576);
  });

  it('has no byte limit on a body where no throttlemb applies', () => {
    const index = new QuotaIndex([stored(systemQuotaId, 'API', [throttle('*', '*', '5')])]);
    expect(index.checksFor(petStore, getPet, 'GET', undefined).largestBody).toBe(Infinity);
    expect(index.checksFor(petStore, getPet, 'GET', undefined).byteRestrictions).toEqual([]);
  });

  it("adds the application's own quota, else the Application Default, counted per application", () => {
    const index = definitions();
    const gold = index.checksFor(petStore, addPet, 'POST', 'gold-app');
    const other = index.checksFor(petStore, addPet, 'POST', 'other-app');
    expect(gold.restrictions.at(-1)!.limit).toBe(2);
    expect(other.restrictions.at(-1)!.limit).toBe(5);
    expect(gold.restrictions.at(-1)!.counterKey).toMatch(/:app:\{app:[0-9a-f]{16}\}:gold-app$/);
    expect(other.restrictions.at(-1)!.counterKey).toMatch(/:other-app$/);
    // The gold application's own quota names only addPet: on getPet it has the API-wide checks alone.
    expect(index.checksFor(petStore, getPet, 'GET', 'gold-app')).toBe(
      index.checksFor(petStore, getPet, 'GET', undefined),
    );
  });

  it('keeps checks right for applications beyond those it keeps', () => {
    const index = definitions();
    for (let i = 0; i < 10_050; i += 1) index.checksFor(petStore, getPet, 'GET', `caller-${i}`);
    const checks = index.checksFor(petStore, getPet, 'GET', 'caller-3');
    expect(checks.restrictions.at(-1)!.counterKey).toMatch(/:caller-3$/);
    expect(checks.restrictions.at(-1)!.limit).toBe(5);
  });

  it('checks enforced twins on one counter under the tightest limit, and hands each twin its state', () => {
    const index = new QuotaIndex([
      stored(systemQuotaId, 'API', [
        throttle('*', '*', '10'),
        throttlemb('*', '*', '1'),
        throttle('*', '*', '3'),
        throttlemb('*', '*', '2'),
      ]),
    ]);
    const checks = index.checksFor(petStore, getPet, 'GET', undefined);
    expect(checks.specs(0).map(({ limit }) => limit)).toEqual([3, 1_048_576]);
    expect(checks.counterOf).toEqual([0, 1, 0, 1]);
    expect(checks.byteRestrictions.map((restriction) => restriction.index)).toEqual([1]);
    const [messages, bytes] = [
      { used: 2, resetMs: 1 },
      { used: 9, resetMs: 2 },
    ];
    expect(checks.statesOf([messages, bytes])).toEqual([messages, bytes, messages, bytes]);
  });

  it('gives a shadow twin a counter of its own, and a restriction without a twin the same counter in either mode', () => {
    const keysOf = (restrictions: RestrictionInput[]) =>
      new QuotaIndex([stored(systemQuotaId, 'API', restrictions)])
        .restrictionsFor(undefined)
        .map((restriction) => restriction.counterKey);
    const shadow = (restriction: RestrictionInput): RestrictionInput => ({ ...restriction, mode: 'shadow' });
    const [enforced] = keysOf([throttle('*', '*', '10')]);
    expect(keysOf([shadow(throttle('*', '*', '10'))])).toEqual([enforced]);
    const [withTwin, shadowTwin, otherShadowTwin, sameLimitShadowTwin] = keysOf([
      throttle('*', '*', '10'),
      shadow(throttle('*', '*', '5')),
      shadow(throttle('*', '*', '7')),
      shadow(throttle('*', '*', '5')),
    ]);
    expect(withTwin).toBe(enforced);
    expect(new Set([withTwin, shadowTwin, otherShadowTwin, sameLimitShadowTwin]).size).toBe(4);
  });

  it('checks nothing where no restriction matches', () => {
    const index = new QuotaIndex([stored(systemQuotaId, 'API', [throttle(petStore, getPet, '5')])]);
    expect(index.checksFor(petStore, addPet, 'POST', 'app-a').restrictions).toEqual([]);
  });
});

describe('QuotaIndex reset generations', () => {
  const records = () => [
    stored(systemQuotaId, 'API', [throttle('*', '*', '1000')]),
    stored(applicationDefaultQuotaId, 'APPLICATION', [
      throttle('*', '*', '5'),
      {
        api: '*',
        method: '*',
        type: 'throttle',
        config: { messages: '3', per: '1', period: 'hour' },
        by: 'client',
      } satisfies RestrictionInput,
    ]),
  ];
  const keyBases = (index: QuotaIndex) => index.countersOf(applicationDefaultQuotaId).map((c) => c.keyBase);

  it("moves only the reset application's counters of the reset restrictions to fresh keys", () => {
    const before = new QuotaIndex(records());
    const [messages, byClient] = keyBases(before);
    const after = new QuotaIndex(records(), new Map([['app-a', new Map([[messages!, 2]])]]));
    const keysOf = (index: QuotaIndex, application: string) =>
      index.restrictionsFor(application).map((restriction) => restriction.counterKey);
    const [apiWideBefore, messagesBefore, byClientBefore] = keysOf(before, 'app-a');
    const [apiWideAfter, messagesAfter, byClientAfter] = keysOf(after, 'app-a');
    // The API-type quota counts all traffic, not the application: a reset leaves it.
    expect(apiWideAfter).toBe(apiWideBefore);
    expect(messagesAfter).not.toBe(messagesBefore);
    expect(messagesAfter).toMatch(/\{app:[0-9a-f]{16}\}#2:app-a$/);
    expect(byClientAfter).toBe(byClientBefore);
    expect(keysOf(after, 'app-b')).toEqual(keysOf(before, 'app-b'));
    // The request path checks the same counters as the usage reads name.
    const checks = after.checksFor(petStore, getPet, 'GET', 'app-a');
    expect(checks.all.map((restriction) => restriction.counterKey)).toEqual(keysOf(after, 'app-a'));
    expect(after.generation('app-a', messages!)).toBe(2);
    expect(after.generation('app-a', byClient!)).toBe(0);
  });

  it('moves the per-caller counters of a reset application to a fresh key prefix', () => {
    const [, byClient] = keyBases(new QuotaIndex(records()));
    const after = new QuotaIndex(records(), new Map([['app-a', new Map([[byClient!, 1]])]]));
    const [, , perCaller] = after.restrictionsFor('app-a');
    expect(perCaller!.counterKey).toBe(`${byClient}#1:`);
    expect(perCaller!.callerScope).toBe('app-a');
  });
});
