import type { IncomingMessage, ServerResponse } from 'node:http';
import { expect } from 'vitest';
import type { UsageRow } from '../../src/quota/usage-history.js';
import { mobileId } from './enforcement-gateways.js';
import {
  adminUser,
  getPetMethodId,
  petsApiId,
  setQuota,
  systemQuotaId,
  throttle,
  userAuth,
  type TestGateway,
} from './test-gateway.js';

/** The day every usage history test runs on (its clocks start at noon UTC). */
export const historyDay = '2026-11-30';
export const historyNoon = Date.parse(`${historyDay}T12:00:00Z`);

/** An upstream that answers `/pets/<units>` with that many units in `X-Tokens`, and a body of 2 bytes. */
export function costingUpstream(req: IncomingMessage, res: ServerResponse): void {
  const cost = (req.url ?? '').split('?')[0]!.split('/').at(-1) ?? '';
  req.resume();
  res.writeHead(200, { 'content-type': 'text/plain', 'x-tokens': cost });
  res.end('ok');
}

/** The System quota: `messages` calls an hour, and units counted from `X-Tokens`. */
export const setHistoryQuota = (gateway: TestGateway, messages: number) =>
  setQuota(
    gateway,
    {
      type: 'API',
      name: 'System',
      restrictions: [
        throttle(messages, 1, 'hour'),
        {
          api: '*',
          method: '*',
          type: 'throttleunits',
          config: { units: 1_000_000, per: 1, period: 'hour', header: 'X-Tokens' },
        },
      ],
    },
    systemQuotaId,
  );

/** The admin API's answer to a history path (with its query), as `user`, with its status. */
export async function historyAnswer(
  gateway: TestGateway,
  pathAndQuery: string,
  user: { username: string; password: string } = adminUser,
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${gateway.adminUrl}/api/portal/v1.3${pathAndQuery}`, {
    headers: { authorization: userAuth(user) },
  });
  return { status: res.status, body: await res.json() };
}

/** Every application's lines of `historyDay`, as the admin API answers them. */
export async function historyRows(gateway: TestGateway): Promise<UsageRow[]> {
  const { status, body } = await historyAnswer(gateway, `/usage/history?from=${historyDay}&to=${historyDay}`);
  expect(status).toBe(200);
  return body as UsageRow[];
}

const addPetMethodId = 'e7a3b5c9-0d14-4b2e-8f6a-9c1d3e5f7a43';

/** The ids of the names the access lines of the pets config write. */
const applicationIds: Record<string, string> = { Mobile: mobileId, project: 'project' };
const methodIds: Record<string, string> = { getPet: getPetMethodId, addPet: addPetMethodId };

/**
 * The lines the history must hold for these access lines: admitted, those that went upstream (an
 * `outcome`); refused, those the quota check refused (`quota: "rejected"`); their bytes as logged; and
 * `units` given by the test (access lines do not say them).
 */
export function historyOfAccessLines(
  lines: ReadonlyArray<Record<string, unknown>>,
  unitsOf: (line: Record<string, unknown>) => number,
): UsageRow[] {
  const rows = new Map<string, UsageRow>();
  for (const line of lines) {
    const admitted = line.api !== null && line.outcome !== null;
    const refused = line.quota === 'rejected';
    if (!admitted && !refused) continue;
    expect(line.api).toBe('Pet Store');
    const application = applicationIds[line.application as string];
    const method = methodIds[line.method as string];
    expect([application, method]).not.toContain(undefined);
    const key = `${application}\t${method}`;
    const row = rows.get(key) ?? {
      date: historyDay,
      application: application!,
      api: petsApiId,
      method: method!,
      admitted: 0,
      refused: 0,
      bytesIn: 0,
      bytesOut: 0,
      units: 0,
    };
    row.admitted += admitted ? 1 : 0;
    row.refused += refused ? 1 : 0;
    row.bytesIn += line.bytesIn as number;
    row.bytesOut += line.bytesOut as number;
    row.units += admitted ? unitsOf(line) : 0;
    rows.set(key, row);
  }
  // The admin API's order: by application, then method (one API, one day here).
  return [...rows.values()].sort(
    (a, b) => a.application!.localeCompare(b.application!) || a.method!.localeCompare(b.method!),
  );
}
