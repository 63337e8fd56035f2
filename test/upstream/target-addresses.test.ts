import { describe, expect, it } from 'vitest';
import type { ApiConfig } from '../../src/config/schema.js';
import {
  noAddresses,
  resolvedTargets,
  systemResolver,
  TargetAddresses,
  type HostResolver,
} from '../../src/upstream/target-addresses.js';
import { cleanupAfterEach } from '../helpers/cleanups.js';
import { FakeTimers } from '../helpers/fake-timers.js';
import { capturingLogger } from '../helpers/log-capture.js';

const defer = cleanupAfterEach();

const apiOf = (targets: string[], dnsRefresh = 30_000, id = 'pets'): ApiConfig =>
  ({
    id,
    protocol: 'http',
    upstream: { targets, balance: 'round-robin', dnsRefresh },
  }) as unknown as ApiConfig;

/** A resolver whose answers the test sets per name: a list of addresses, or an error to throw. */
class Answers {
  readonly asked: string[] = [];
  readonly answers = new Map<string, readonly string[] | Error>();
  readonly resolve: HostResolver = async (hostname) => {
    this.asked.push(hostname);
    const answer = this.answers.get(hostname);
    if (answer === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    if (answer instanceof Error) throw answer;
    return answer;
  };
}

function addressesOn(timers: FakeTimers, answers: Answers) {
  const { lines, logger } = capturingLogger();
  let changes = 0;
  const addresses = new TargetAddresses(answers.resolve, timers, logger, () => (changes += 1));
  defer(() => addresses.close());
  return { addresses, lines, changes: () => changes };
}

describe('the targets of a pool, from the addresses of their names', () => {
  it('make each address of a name a target of the name’s weight, with its path and the name as its host', () => {
    const addresses = new Map([['svc.test', ['10.0.0.1', '10.0.0.2']]]);
    expect(
      resolvedTargets(
        [
          { url: 'http://svc.test:9000/v2', weight: 3 },
          { url: 'http://10.0.0.9:9000/v2', weight: 1 },
        ],
        (hostname) => addresses.get(hostname) ?? null,
      ),
    ).toEqual([
      { url: 'http://10.0.0.1:9000/v2', origin: 'http://10.0.0.1:9000', host: 'svc.test:9000', weight: 3 },
      { url: 'http://10.0.0.2:9000/v2', origin: 'http://10.0.0.2:9000', host: 'svc.test:9000', weight: 3 },
      { url: 'http://10.0.0.9:9000/v2', origin: 'http://10.0.0.9:9000', host: null, weight: 1 },
    ]);
  });

  it('put an IPv6 address in brackets, keep the default port out, and keep a name not resolved as it is', () => {
    const addresses = new Map([['svc.test', ['::1']]]);
    const of = (hostname: string) => addresses.get(hostname) ?? null;
    expect(resolvedTargets([{ url: 'https://svc.test/v2', weight: 1 }], of)).toEqual([
      { url: 'https://[::1]/v2', origin: 'https://[::1]', host: 'svc.test', weight: 1 },
    ]);
    expect(resolvedTargets([{ url: 'http://other.test:80', weight: 2 }], of)).toEqual([
      { url: 'http://other.test:80', origin: 'http://other.test', host: null, weight: 2 },
    ]);
  });

  it('never resolve an IP literal, and make an address two targets resolve to one target, the first’s', () => {
    const asked: string[] = [];
    const of = (hostname: string) => {
      asked.push(hostname);
      return ['10.0.0.1'];
    };
    const targets = resolvedTargets(
      [
        { url: 'http://a.test:1', weight: 2 },
        { url: 'http://b.test:1', weight: 5 },
        { url: 'http://[::1]:1', weight: 1 },
        { url: 'http://127.0.0.1:1', weight: 1 },
      ],
      of,
    );
    expect(asked).toEqual(['a.test', 'b.test']);
    expect(targets.map(({ origin, host, weight }) => [origin, host, weight])).toEqual([
      ['http://10.0.0.1:1', 'a.test:1', 2],
      ['http://[::1]:1', null, 1],
      ['http://127.0.0.1:1', null, 1],
    ]);
    expect(resolvedTargets([{ url: 'http://a.test:1', weight: 2 }], noAddresses)[0]!.origin).toBe(
      'http://a.test:1',
    );
  });
});

describe('the resolution of the targets’ host names', () => {
  it('resolves each distinct name of the pools once as it is configured, and again every dnsRefresh (the least)', async () => {
    const timers = new FakeTimers();
    const answers = new Answers();
    answers.answers.set('svc.test', ['10.0.0.2', '10.0.0.1']);
    answers.answers.set('db.test', ['10.0.1.1']);
    const { addresses, changes } = addressesOn(timers, answers);
    addresses.watch([
      apiOf(['http://svc.test:1', 'http://10.0.0.9:1', 'http://db.test:1'], 10_000),
      apiOf(['http://svc.test:2'], 5_000, 'orders'),
      { id: 'one', upstream: 'http://one-url.test:1' } as unknown as ApiConfig,
    ]);
    await addresses.idle();
    expect(answers.asked).toEqual(['svc.test', 'db.test']);
    expect(addresses.addressesOf('svc.test')).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(addresses.addressesOf('one-url.test')).toBeNull();
    expect(changes()).toBe(2);
    expect(timers.waiting()).toEqual([5_000, 10_000]);
    timers.advance(5_000);
    await addresses.idle();
    expect(answers.asked).toEqual(['svc.test', 'db.test', 'svc.test']);
    // The same answer in another order is no change.
    expect(changes()).toBe(2);
  });

  it('tells of a change of addresses, which the name’s targets follow from then on', async () => {
    const timers = new FakeTimers();
    const answers = new Answers();
    answers.answers.set('svc.test', ['10.0.0.1', '10.0.0.2']);
    const { addresses, changes } = addressesOn(timers, answers);
    addresses.watch([apiOf(['http://svc.test:1'], 1_000)]);
    await addresses.idle();
    answers.answers.set('svc.test', ['10.0.0.2']);
    timers.advance(1_000);
    await addresses.idle();
    expect(changes()).toBe(2);
    expect(addresses.addressesOf('svc.test')).toEqual(['10.0.0.2']);
  });

  it('keeps the addresses a name had when a resolution fails, warning once until one succeeds', async () => {
    const timers = new FakeTimers();
    const answers = new Answers();
    answers.answers.set('svc.test', ['10.0.0.1']);
    const { addresses, lines, changes } = addressesOn(timers, answers);
    addresses.watch([apiOf(['http://svc.test:1'], 1_000)]);
    await addresses.idle();
    answers.answers.set('svc.test', Object.assign(new Error('queryA ETIMEOUT'), { code: 'EAI_AGAIN' }));
    for (let i = 0; i < 3; i += 1) {
      timers.advance(1_000);
      await addresses.idle();
    }
    answers.answers.set('svc.test', []);
    timers.advance(1_000);
    await addresses.idle();
    expect(addresses.addressesOf('svc.test')).toEqual(['10.0.0.1']);
    expect(changes()).toBe(1);
    const warnings = lines.filter(({ level }) => level === 40);
    expect(warnings).toEqual([
      expect.objectContaining({
        host: 'svc.test',
        err: expect.objectContaining({ code: 'EAI_AGAIN', message: 'queryA ETIMEOUT' }),
        addresses: ['10.0.0.1'],
        msg: 'upstream host name not resolved: its targets keep the addresses it had',
      }),
    ]);
    answers.answers.set('svc.test', ['10.0.0.1']);
    timers.advance(1_000);
    await addresses.idle();
    expect(lines.at(-1)).toMatchObject({
      level: 30,
      host: 'svc.test',
      msg: 'upstream host name resolved again',
    });
    answers.answers.delete('svc.test');
    timers.advance(1_000);
    await addresses.idle();
    expect(lines.filter(({ level }) => level === 40)).toHaveLength(2);
  });

  it('leaves a name never resolved as it is configured, and says so', async () => {
    const timers = new FakeTimers();
    const answers = new Answers();
    const { addresses, lines, changes } = addressesOn(timers, answers);
    addresses.watch([apiOf(['http://svc.test:1'])]);
    await addresses.idle();
    expect(addresses.addressesOf('svc.test')).toBeNull();
    expect(changes()).toBe(0);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 40,
        host: 'svc.test',
        msg: 'upstream host name not resolved: its target stays the name, resolved as each connection opens',
      }),
    ]);
  });

  it('stops resolving a name a reload drops, moves a name to its new refresh, and stops every timer on close', async () => {
    const timers = new FakeTimers();
    const answers = new Answers();
    answers.answers.set('a.test', ['10.0.0.1']);
    answers.answers.set('b.test', ['10.0.0.2']);
    const { addresses, changes } = addressesOn(timers, answers);
    addresses.watch([apiOf(['http://a.test:1', 'http://b.test:1'], 1_000)]);
    await addresses.idle();
    expect(timers.waiting()).toEqual([1_000, 1_000]);
    addresses.watch([apiOf(['http://a.test:1'], 4_000)]);
    expect(timers.waiting()).toEqual([4_000]);
    expect(addresses.addressesOf('b.test')).toBeNull();
    expect(addresses.addressesOf('a.test')).toEqual(['10.0.0.1']);
    timers.advance(4_000);
    await addresses.idle();
    expect(answers.asked).toEqual(['a.test', 'b.test', 'a.test']);
    expect(changes()).toBe(2);
    addresses.close();
    expect(timers.waiting()).toEqual([]);
  });

  it('does not resolve a name again while its resolution before is under way', async () => {
    const timers = new FakeTimers();
    let asked = 0;
    let answer: (addresses: string[]) => void = () => undefined;
    const slow: HostResolver = () => {
      asked += 1;
      return new Promise((resolve) => (answer = resolve));
    };
    const addresses = new TargetAddresses(slow, timers, capturingLogger().logger, () => undefined);
    defer(() => addresses.close());
    addresses.watch([apiOf(['http://svc.test:1'], 1_000)]);
    timers.advance(1_000);
    timers.advance(1_000);
    expect(asked).toBe(1);
    answer(['10.0.0.1']);
    await addresses.idle();
    expect(addresses.addressesOf('svc.test')).toEqual(['10.0.0.1']);
  });
});

describe('the system resolver', () => {
  it('resolves as Node’s connections do, /etc/hosts included: localhost to its loopback address', async () => {
    expect(await systemResolver('localhost')).toContain('127.0.0.1');
  });
});
