import { cleanupAfterEach } from './cleanups.js';
import { basicAuth, devKey, petsConfig, startTestGateway, type TestGateway } from './test-gateway.js';
import { startUpstream, type TestUpstream } from './upstream.js';

/** The development key as Basic credentials. */
export const auth = { authorization: basicAuth(devKey) };

/**
 * Gateways and upstreams started by a test, stopped after it (a gateway before its upstream), and `defer`
 * for anything else the test starts.
 */
export function useProxyParts() {
  const defer = cleanupAfterEach();
  return {
    defer,
    async gatewayFor(upstreamUrl: string, overrides: Record<string, unknown> = {}): Promise<TestGateway> {
      const gateway = await startTestGateway(petsConfig(upstreamUrl, overrides));
      defer(() => gateway.close());
      return gateway;
    },
    async upstreamWith(handler?: Parameters<typeof startUpstream>[0]): Promise<TestUpstream> {
      const upstream = await startUpstream(handler);
      defer(() => upstream.close());
      return upstream;
    },
  };
}

/** Resolves once the events already queued have run. */
export const nextTick = () => new Promise((resolve) => setImmediate(resolve));
