import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthResult, Authenticator } from '../../src/auth/authenticator.js';
import { compileCatalog } from '../../src/catalog/router.js';
import { ApplicationNames } from '../../src/config/application-names.js';
import type { ApiConfig } from '../../src/config/schema.js';
import { Limiter } from '../../src/limiter/limiter.js';
import { MemoryCounterStore } from '../../src/limiter/memory-counter-store.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { CallerBook } from '../../src/quota/caller-book.js';
import type { StoredQuota } from '../../src/quota/model.js';
import { QuotaIndex } from '../../src/quota/quota-index.js';
import { OpenExchanges } from '../../src/gateway/open-exchanges.js';
import type { ExchangeRecord } from '../../src/gateway/record.js';
import { RuleSet } from '../../src/gateway/rule-set.js';
import type { StepContext } from '../../src/gateway/steps/context.js';
import { identify } from '../../src/gateway/steps/identify.js';
import { CatalogNames, UsageBudget, UsagePath } from '../../src/gateway/usage-endpoint.js';
import { TrustedPeers } from '../../src/upstream/fields/trust-proxy.js';
import { UpstreamProxy } from '../../src/upstream/upstream-proxy.js';
import { FakeClock } from './fake-clock.js';
import { capturingLogger } from './log-capture.js';

/** The APIs of a step test: a REST API (at `upstream`/v2) with two methods on one path, and a gRPC service. */
export const stepApis = (upstream = 'http://127.0.0.1:9'): ApiConfig[] => [
  {
    id: 'pets',
    name: 'Pets',
    basePath: '/pets',
    upstream: `${upstream}/v2`,
    methods: [
      { id: 'getPet', name: 'getPet', verb: 'GET', path: '/{petId}' },
      { id: 'putPet', name: 'putPet', verb: 'PUT', path: '/{petId}' },
    ],
    caseSensitive: false,
    passUndeclared: false,
    protocol: 'http',
    websocket: false,
  },
  {
    id: 'greeter',
    name: 'Greeter',
    basePath: '/helloworld.Greeter',
    upstream: 'http://127.0.0.1:9',
    methods: [{ id: 'sayHello', name: 'SayHello', verb: 'POST', path: '/SayHello' }],
    caseSensitive: false,
    passUndeclared: false,
    protocol: 'grpc',
    websocket: false,
  },
];

/** An authenticator that answers `result` to every request (a promise of it when `wait`), and counts them. */
export function answeringAuthenticator(result: AuthResult, wait = false) {
  const seen: string[] = [];
  const authenticator: Authenticator = {
    scheme: 'test',
    authenticate(_req, _res, path) {
      seen.push(path);
      return wait ? Promise.resolve(result) : result;
    },
    documentation: { swaggerSecurity: () => ({ securityDefinitions: {}, security: [] }) },
  };
  return { authenticator, seen };
}

/** The rule set of `stepApis`, with `authenticator` and the usage path at `/_quotagate/usage`. */
export function stepRuleSet(authenticator: Authenticator, upstream?: string): RuleSet {
  const apis = stepApis(upstream);
  const router = compileCatalog(apis, () => authenticator);
  return new RuleSet(
    router,
    authenticator,
    new TrustedPeers([]),
    new ApplicationNames([]),
    1,
    UsagePath.of('/_quotagate/usage', router),
    new CatalogNames(apis),
    false,
    capturingLogger().logger,
  );
}

/**
 * The parts the steps share, as the pipeline holds them: a memory limiter on a fake clock, the quotas
 * of `quotas`, metrics, a capturing logger and an upstream proxy that is never dispatched to.
 */
export function stepContext(quotas: StoredQuota[] = []) {
  const clock = new FakeClock();
  const { lines, logger } = capturingLogger();
  const metrics = createMetrics();
  const limiter = new Limiter({
    shared: null,
    local: new MemoryCounterStore({ now: clock.now }),
    onError: 'local',
    probe: () => Promise.resolve(true),
    timeoutMs: 50,
    clock,
    logger,
    metrics,
  });
  const index = new QuotaIndex(quotas);
  let finished = 0;
  const context: StepContext = {
    proxy: new UpstreamProxy({
      proxyTimeout: 5_000,
      logger,
      webSocket: { pingIntervalMs: 0, maxFrameBytes: 1 },
    }),
    quotas: () => index,
    limiter,
    tracing: null,
    logger,
    accessLog: null,
    usageBook: null,
    metrics,
    clock,
    callers: new CallerBook(clock.now),
    usageBudget: new UsageBudget(),
    openExchanges: new OpenExchanges({ timers: clock, now: clock.now, limiter, logger }),
    alerts: null,
    rejectedLines: 0,
    restOfAnswerRead: () => undefined,
    done: () => {
      finished += 1;
    },
  };
  return { context, clock, lines, metrics, finished: () => finished };
}

/**
 * A real HTTP server on 127.0.0.1 that makes each request's record as the pipeline does (`identify`) and
 * hands it to `step`; a request the step leaves unanswered is answered 204 once it is done.
 */
export async function recordServer(
  ruleSet: RuleSet,
  step: (record: ExchangeRecord) => unknown,
): Promise<{ url: string; records: ExchangeRecord[]; close: () => Promise<void> }> {
  const records: ExchangeRecord[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const record = identify(req, res, false, null, ruleSet, false);
    records.push(record);
    void Promise.resolve(step(record)).then(() => {
      if (!res.headersSent) res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    records,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
