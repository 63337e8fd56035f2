import http from 'node:http';
import { status as grpcStatus } from '@grpc/grpc-js';
import type { CliGateway } from './cli-gateway.js';
import { credentials } from './grpc-credentials.js';
import { greeterApi, greeterClient, startGreeterUpstream } from './grpc-greeter.js';
import { http2Fetch } from './http2-client.js';
import { chat, llmApis, openAiTokens, post } from './llm-gateway.js';
import { startLlmUpstream } from './llm-upstream.js';
import { request } from './raw-http.js';
import {
  basicAuth,
  devKey,
  petsApiId,
  petsConfig,
  setQuota,
  systemQuotaId,
  throttle,
} from './test-gateway.js';
import { closed, echo, mustOpen, startWebSocketUpstream, wsUrl } from './websockets.js';

/**
 * Traffic of every kind a gateway serves, and the upstreams it goes to: HTTP/1.1, HTTP/2 (h2c), a
 * WebSocket, a gRPC call, LLM answers charged by their units (one whose units cannot be read), a 401,
 * a 429, a shadow refusal, an unreachable upstream, and callers enough to fill `store.maxCounterMemoryMb`
 * (a 503, shadow counts dropped and left uncounted). What /metrics must then say is what it returns.
 */
const listPetsId = '8b0e6c1a-3f47-4f0e-a2f5-6d9c1e7b4a21';
const findByStatusId = '0f9e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f';
const llmApiId = llmApis('')[0]!.id;
const callersApiId = '2c4e6a8b-0d1f-4e3a-9b5c-7d9e1f3a5b7c';

/** The upstreams of the traffic: one for REST and WebSockets, a gRPC Greeter, an LLM API. */
export async function startTrafficUpstreams() {
  const [web, greeter, llm] = await Promise.all([
    startWebSocketUpstream(),
    startGreeterUpstream(),
    startLlmUpstream(),
  ]);
  return {
    web,
    greeter,
    llm,
    close: () => Promise.all([web.close(), greeter.close(), llm.close()]).then(() => undefined),
  };
}
type TrafficUpstreams = Awaited<ReturnType<typeof startTrafficUpstreams>>;

/**
 * A config of five APIs over `upstreams` (Pet Store, Greeter, LLM, Callers, and `Dead end`, whose upstream
 * never answers), its counters bound to 1 MiB, its access lines written at once.
 */
export function trafficConfig(upstreams: TrafficUpstreams, extra: Record<string, unknown> = {}) {
  const pets = petsConfig(upstreams.web.url).apis as object[];
  const route = (id: string, name: string, basePath: string, upstream: string) => ({
    id,
    name,
    basePath,
    upstream,
    methods: [{ id: `${id.slice(0, -12)}000000000001`, name: `${name} call`, verb: 'GET', path: '/{id}' }],
  });
  return petsConfig(upstreams.web.url, {
    apis: [
      ...pets,
      greeterApi(`http://${upstreams.greeter.address}`),
      ...llmApis(upstreams.llm.url),
      route(callersApiId, 'Callers', '/callers', upstreams.web.url),
      route('9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a', 'Dead end', '/dead', 'http://127.0.0.1:9'),
    ],
    store: { type: 'memory', maxCounterMemoryMb: 1 },
    accessLog: { flushMs: 0 },
    ...extra,
  });
}

/** Caller counts of the Callers API: an enforced one and its shadow twin, each a counter per caller. */
const perCaller = throttle(1_000_000, 1, 'hour', { api: callersApiId, by: 'header:X-Caller' });

/**
 * The System quota of the traffic: findByStatus once an hour (0), listPets once an hour in shadow (1),
 * the LLM API's tokens (2), and the per-caller counts of Callers (3, and 4 in shadow).
 */
export async function setTrafficQuota(gateway: CliGateway): Promise<void> {
  const restrictions = [
    throttle(1, 1, 'hour', { api: petsApiId, method: findByStatusId }),
    { ...throttle(1, 1, 'hour', { api: petsApiId, method: listPetsId }), mode: 'shadow' },
    {
      api: llmApiId,
      method: '*',
      type: 'throttleunits',
      config: { units: 1_000, per: 1, period: 'hour', default: 7, body: openAiTokens },
    },
    perCaller,
    { ...perCaller, mode: 'shadow' },
  ];
  await setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
}

/** What one request was answered: `quotagate_requests_total`'s labels. */
export interface Answered {
  api: string;
  method: string;
  status: number;
}

const withKey = { authorization: basicAuth(devKey) };

/**
 * Sends the traffic, each request on a connection of its own (so that `workers: N` spreads it), and
 * answers what each was answered. Throws when a request is not answered as the traffic means it to be.
 */
export async function sendEveryKind(gateway: CliGateway): Promise<Answered[]> {
  const answered: Answered[] = [];
  const answeredAs = async (api: string, method: string, status: number, got: Promise<number>) => {
    const actual = await got;
    if (actual !== status) throw new Error(`${api} ${method}: ${actual}, not ${status}`);
    answered.push({ api, method, status });
  };
  const get = (path: string, headers: Record<string, string> = withKey) =>
    request(gateway.url, { path, headers }).then((answer) => answer.status);

  await answeredAs('Pet Store', 'getPet', 200, get('/pets/1'));
  await answeredAs('Pet Store', 'getPet', 401, get('/pets/1', {}));
  await answeredAs('Pet Store', 'findByStatus', 200, get('/pets/findByStatus'));
  await answeredAs('Pet Store', 'findByStatus', 429, get('/pets/findByStatus'));
  // The second is past the shadow restriction, and goes through.
  await answeredAs('Pet Store', 'listPets', 200, get('/pets'));
  await answeredAs('Pet Store', 'listPets', 200, get('/pets'));
  await answeredAs('Dead end', 'Dead end call', 502, get('/dead/1'));
  const h2 = http2Fetch(gateway.url, { path: '/pets/2', headers: withKey });
  await answeredAs(
    'Pet Store',
    'getPet',
    200,
    h2.then((answer) => answer.status),
  );
  const { ws } = await mustOpen(wsUrl(gateway.url, '/pets/3'), withKey);
  if ((await echo(ws, 'ping')) !== 'ping') throw new Error('the WebSocket did not echo');
  ws.close(1000);
  await closed(ws);
  answered.push({ api: 'Pet Store', method: 'getPet', status: 101 });
  const client = greeterClient(new URL(gateway.url).host);
  try {
    const call = await client.sayHello('ann', credentials());
    await answeredAs(
      'Greeter',
      'SayHello',
      200,
      Promise.resolve(call.status.code === grpcStatus.OK ? 200 : 0),
    );
  } finally {
    client.close();
  }
  const llm = (headers: Record<string, string> = {}) =>
    post(gateway, '/v1/chat/completions', chat, { headers }).then((answer) => answer.status);
  await answeredAs('LLM', 'chatCompletions', 200, llm());
  // Its body is cut short: no usage can be read from it, and the default is charged.
  await answeredAs('LLM', 'chatCompletions', 200, llm({ 'x-answer': 'malformed' }));
  answered.push(...(await fillCounterMemory(gateway)));
  return answered;
}

/**
 * New callers of the Callers API, one after another on one connection, until the counters' memory is
 * full: the enforced count of each takes the room of shadow counts, then a new caller gets 503.
 */
async function fillCounterMemory(gateway: CliGateway): Promise<Answered[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const answered: Answered[] = [];
  try {
    for (let caller = 0; caller < 10_000; caller += 1) {
      const status = await new Promise<number>((resolve, reject) => {
        http
          .get(
            `${gateway.url}/callers/1`,
            { agent, headers: { ...withKey, 'x-caller': `caller-${caller}` } },
            (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            },
          )
          .on('error', reject);
      });
      answered.push({ api: 'Callers', method: 'Callers call', status });
      if (status === 503) return answered;
      if (status !== 200) throw new Error(`caller-${caller}: ${status}`);
    }
    throw new Error('10,000 callers did not fill 1 MiB of counters');
  } finally {
    agent.destroy();
  }
}
