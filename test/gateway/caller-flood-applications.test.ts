import { describe, expect, it } from 'vitest';
import { mobileKey, useEnforcementGateways, webKey } from '../helpers/enforcement-gateways.js';
import { floodStatuses as statuses, tally, tenants } from '../helpers/floods.js';
import { setQuota, systemQuotaId, throttle } from '../helpers/test-gateway.js';

/**
 * One application's flood of new callers on a restriction that all applications share (the System quota
 * counted by caller) crowds only its own callers: each application has its own book of callers and its
 * own overflow count (issue 42; docs/quotas.md, "Counting by caller"). Each gateway keeps its own books,
 * whatever the store: the memory store here, a fleet of two on Redis in
 * test/stores/fleet-caller-counts.test.ts.
 */
const { gatewayWith } = useEnforcementGateways();

/** Callers one application counts apart under one restriction, in one gateway. */
const perApplication = 10_000;

/** The `n`th /64 of 2001:db8:1::/48, its host part `::1`. */
const subnet = (n: number) => `2001:db8:1:${n.toString(16)}::1`;

describe('a flood of new callers from one application', () => {
  it("leaves another application's new tenants their own counts: the flood shares its own overflow count", async () => {
    const gateway = await gatewayWith();
    // An hour's window: the flood may take over a minute on a loaded machine.
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'hour', { by: 'header:X-Tenant' })] },
      systemQuotaId,
    );
    // Mobile: 10,050 distinct tenants, each once. 10,000 get counts of their own; the 50 beyond share
    // Mobile's overflow count, 2 of them admitted.
    expect(tally(await statuses(gateway, mobileKey, tenants('m', perApplication + 50)))).toEqual({
      ok: perApplication + 2,
      refused: 48,
      other: 0,
    });
    // Web's 8 new tenants each have a count of their own: 2 each, then 429.
    expect(await statuses(gateway, webKey, tenants('w', 8))).toEqual(Array(8).fill(200));
    expect(await statuses(gateway, webKey, tenants('w', 8))).toEqual(Array(8).fill(200));
    expect(await statuses(gateway, webKey, tenants('w', 8))).toEqual(Array(8).fill(429));
    // Mobile's next new tenant is still on its own overflow count, which is full.
    expect(await statuses(gateway, mobileKey, [{ 'x-tenant': 'm-new' }])).toEqual([429]);
  }, 300_000);

  it("leaves another application's new clients their own counts when one floods from an IPv6 /48", async () => {
    const gateway = await gatewayWith({ trustProxy: ['127.0.0.1'] });
    await setQuota(
      gateway,
      { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'hour', { by: 'client' })] },
      systemQuotaId,
    );
    const from = (first: number, count: number) =>
      Array.from({ length: count }, (_, i) => ({ 'x-forwarded-for': subnet(first + i) }));
    // Mobile: 10,050 /64s of one /48, each a client of its own.
    expect(tally(await statuses(gateway, mobileKey, from(0, perApplication + 50)))).toEqual({
      ok: perApplication + 2,
      refused: 48,
      other: 0,
    });
    // Web's 8 clients, from /64s Mobile never used, each have a count of their own.
    const web = from(0x8000, 8);
    expect(await statuses(gateway, webKey, web)).toEqual(Array(8).fill(200));
    expect(await statuses(gateway, webKey, web)).toEqual(Array(8).fill(200));
    expect(await statuses(gateway, webKey, web)).toEqual(Array(8).fill(429));
  }, 300_000);
});
