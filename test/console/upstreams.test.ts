import { describe, expect, it } from 'vitest';
import {
  apisWithoutTarget,
  mergeUpstreams,
  targetsSummary,
  type ApiUpstream,
  type TargetState,
} from '../../src/console/logic/upstreams.js';

const state = (url: string, extra: Partial<TargetState> = {}): TargetState => ({
  url,
  host: null,
  weight: 1,
  healthy: true,
  ejected: false,
  ejections: 0,
  inFlight: 0,
  requests: 0,
  failures: 0,
  retries: 0,
  ...extra,
});

const pool = (targets: TargetState[], healthCheck = true): ApiUpstream => ({
  api: 'pets',
  name: 'Pet Store',
  balance: 'round-robin',
  healthCheck,
  targets,
});

describe('the upstream states of several data planes', () => {
  it('adds up the counts and exchanges in flight, and finds a target healthy only while every one does', () => {
    const merged = mergeUpstreams([
      [pool([state('http://a', { requests: 3, inFlight: 1 }), state('http://b', { failures: 2 })])],
      [
        pool([
          state('http://a', { requests: 4, retries: 1, ejected: true, ejections: 1 }),
          state('http://b', { healthy: false, ejections: 2 }),
        ]),
      ],
    ]);
    // Ejected as soon as one data plane has it ejected; ejections add up.
    expect(merged).toEqual([
      pool([
        state('http://a', { requests: 7, inFlight: 1, retries: 1, ejected: true, ejections: 1 }),
        state('http://b', { failures: 2, healthy: false, ejections: 2 }),
      ]),
    ]);
  });

  it('leaves out the answer of a data plane that runs another list of targets (a reload under way)', () => {
    const merged = mergeUpstreams([
      [pool([state('http://a', { requests: 1 })])],
      [pool([state('http://c', { requests: 5, healthy: false })])],
    ]);
    expect(merged).toEqual([pool([state('http://a', { requests: 1 })])]);
    expect(mergeUpstreams([])).toEqual([]);
  });
});

describe('readiness by upstream', () => {
  it('names the pool APIs with health checks whose every target is out, and no other', () => {
    expect(apisWithoutTarget([pool([state('http://a', { healthy: false }), state('http://b')])])).toEqual([]);
    expect(apisWithoutTarget([pool([state('http://a', { healthy: false })])])).toEqual(['Pet Store']);
    expect(apisWithoutTarget([pool([state('http://a', { healthy: false })], false)])).toEqual([]);
  });
});

describe("the console's summary of an API's targets", () => {
  it('says how many targets are healthy and the balance, or that the API has one URL', () => {
    expect(targetsSummary(pool([state('http://a', { healthy: false }), state('http://b')]))).toBe(
      '1 of 2 targets healthy, round-robin',
    );
    expect(targetsSummary(pool([state('http://a')], false))).toBe(
      '1 of 1 targets healthy (no health checks), round-robin',
    );
    expect(targetsSummary({ ...pool([state('http://a')], false), balance: null })).toBe('One upstream URL');
  });
});
