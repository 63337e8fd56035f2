import { describe, expect, it } from 'vitest';
import { eachStore, useEnforcementGateways } from '../../helpers/enforcement-gateways.js';
import { withKey } from '../../helpers/grpc-credentials.js';
import { rawExchange } from '../../helpers/raw-http.js';
import { setQuota, systemQuotaId, throttle, type TestGateway } from '../../helpers/test-gateway.js';

/**
 * The field a restriction counts `by` is the caller the upstream serves too: no other spelling of it, and
 * no field a client has made hop-by-hop, may make the upstream read one caller while the gateway counted
 * another (issue 42). CGI-style stacks (WSGI, Rack, PHP) read `X_Tenant` and `X-Tenant` as one variable,
 * `HTTP_X_TENANT`. See docs/quotas.md, "Counting by caller".
 */
const { gatewayWith, upstream } = useEnforcementGateways();

const systemBy = (gateway: TestGateway, by: string) =>
  setQuota(
    gateway,
    { type: 'API', name: 'System', restrictions: [throttle(2, 1, 'minute', { by })] },
    systemQuotaId,
  );

/** The status of GET /pets/1 sent with these exact header lines on a socket of its own. */
async function rawStatus(gateway: TestGateway, lines: string[], connection = 'close'): Promise<number> {
  const head = ['GET /pets/1 HTTP/1.1', 'Host: pets', `Authorization: ${withKey.authorization}`, ...lines];
  const answer = await rawExchange(gateway.url, `${head.join('\r\n')}\r\nConnection: ${connection}\r\n\r\n`);
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
}

/** The values the last upstream request gave the CGI variable `HTTP_X_TENANT`, in every spelling. */
function tenantVariable(): string[] {
  const raw = upstream().requests.at(-1)!.rawHeaders;
  return raw.flatMap((name, i) =>
    i % 2 === 0 && name.toUpperCase().replace(/-/g, '_') === 'X_TENANT' ? [`${name}: ${raw[i + 1]}`] : [],
  );
}

describe.each(eachStore)('the field a restriction counts by, on %s', (_store, store) => {
  it('goes upstream in the spelling it was counted by only: X_Tenant never reaches the upstream', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'header:X-Tenant');
    expect(await rawStatus(gateway, ['X-Tenant: acme', 'X_Tenant: evil'])).toBe(200);
    expect(tenantVariable()).toEqual(['x-tenant: acme']);
    // Alone, the underscore spelling is no tenant: the request is counted by its address, and it goes
    // upstream without it.
    expect(await rawStatus(gateway, ['X_Tenant: evil'])).toBe(200);
    expect(tenantVariable()).toEqual([]);
    // acme was counted once, by its own field.
    expect(await rawStatus(gateway, ['X-Tenant: acme'])).toBe(200);
    expect(await rawStatus(gateway, ['X-Tenant: acme'])).toBe(429);
  });

  it('drops the dashed spelling of a field counted with an underscore, X-Tenant for X_Tenant', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'header:X_Tenant');
    expect(await rawStatus(gateway, ['X_Tenant: acme', 'X-Tenant: evil'])).toBe(200);
    expect(tenantVariable()).toEqual(['x_tenant: acme']);
  });

  it('counts a request whose Connection names the field as the request without it, and sends the field nowhere', async () => {
    const gateway = await gatewayWith(store());
    await systemBy(gateway, 'header:X-Tenant');
    // Hop-by-hop for this connection (RFC 9110 §7.6.1): the upstream never sees it, so it names no caller.
    expect(await rawStatus(gateway, ['X-Tenant: a'], 'X-Tenant, close')).toBe(200);
    expect(tenantVariable()).toEqual([]);
    // Two lines of it are no refusal then: they name no caller either way.
    expect(await rawStatus(gateway, ['X-Tenant: a', 'X-Tenant: b'], 'close, x-tenant')).toBe(200);
    // Both were counted on this client's address, as a request without the field is.
    expect(await rawStatus(gateway, [])).toBe(429);
    // Nothing was counted on the tenant a.
    expect(await rawStatus(gateway, ['X-Tenant: a'])).toBe(200);
    expect(tenantVariable()).toEqual(['x-tenant: a']);
  });
});
