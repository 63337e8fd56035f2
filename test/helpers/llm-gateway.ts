import http, { type ClientRequest, type IncomingHttpHeaders } from 'node:http';
import { startLlmUpstream, type LlmUpstreamOptions } from './llm-upstream.js';
import {
  basicAuth,
  devKey,
  petsConfig,
  quotaUsage,
  setQuota,
  startTestGateway,
  systemQuotaId,
  type TestGateway,
} from './test-gateway.js';
import type { TestUpstream } from './upstream.js';

/** A gateway in front of an LLM API (`startLlmUpstream`), the requests its clients send, and what it charged. */
export const llmApis = (upstream: string) => [
  {
    id: '3f0c2b1a-9e8d-4c7b-a6f5-e4d3c2b1a0f9',
    name: 'LLM',
    basePath: '/v1',
    upstream: `${upstream}/v1`,
    methods: [
      {
        id: '7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d',
        name: 'chatCompletions',
        verb: 'POST',
        path: '/chat/completions',
      },
      { id: '1d2c3b4a-5f6e-4d7c-8b9a-0f1e2d3c4b5a', name: 'messages', verb: 'POST', path: '/messages' },
      { id: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b', name: 'models', verb: 'GET', path: '/models' },
    ],
  },
];

export const openAiTokens = 'usage.total_tokens';
export const anthropicPaths = ['message.usage.input_tokens', 'usage.output_tokens'];

export const tokens = (config: Record<string, unknown>) => ({
  api: '*',
  method: '*',
  type: 'throttleunits',
  config: { units: 1_000, per: 1, period: 'hour', default: 7, ...config },
});

export const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'Hello' }] };
export const chatStream = { ...chat, stream: true, stream_options: { include_usage: true } };
export const messages = { model: 'claude-sonnet-4-5', max_tokens: 64, stream: true, messages: chat.messages };

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * POSTs `body` as JSON to `path`; `onEvent` is told of each event of an event stream as it arrives
 * (with the request, to hang up). Resolves with the whole answer, or once the client hung up.
 */
export function post(
  gateway: Pick<TestGateway, 'url'>,
  path: string,
  body: object,
  {
    method = 'POST',
    headers = {},
    onEvent,
  }: {
    method?: string;
    headers?: Record<string, string>;
    onEvent?: (index: number, req: ClientRequest) => void;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${gateway.url}${path}`,
      {
        method,
        agent: false,
        headers: { authorization: basicAuth(devKey), 'content-type': 'application/json', ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let events = 0;
        const answer = () => ({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks),
        });
        res.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          const ended = Buffer.concat(chunks).toString('utf8').split('\n\n').length - 1;
          for (; events < ended; events += 1) onEvent?.(events, req);
          if (req.destroyed) resolve(answer());
        });
        res.on('end', () => resolve(answer()));
        res.on('error', reject);
      },
    );
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end(method === 'POST' ? JSON.stringify(body) : undefined);
  });
}

/**
 * A gateway over an upstream of `startLlmUpstream` (its `options`) whose System quota has `restrictions`,
 * with `config` over the pets config; both stopped by `defer` after the test.
 */
export async function startLlmGateway(
  defer: (cleanup: () => Promise<void> | void) => void,
  config: Record<string, unknown>,
  restrictions: Array<Record<string, unknown>>,
  options: LlmUpstreamOptions = {},
): Promise<{ gateway: TestGateway; upstream: TestUpstream }> {
  const upstream = await startLlmUpstream(options);
  defer(() => upstream.close());
  const gateway = await startTestGateway(
    petsConfig(upstream.url, { apis: llmApis(upstream.url), ...config }),
  );
  defer(() => gateway.close());
  await setQuota(gateway, { type: 'API', name: 'System', restrictions }, systemQuotaId);
  return { gateway, upstream };
}

export const usedOf = async (gateway: TestGateway) =>
  (await quotaUsage(gateway.adminUrl, systemQuotaId)).restrictions[0]!.used;

export const unreadable = async (gateway: TestGateway) => {
  const metrics = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  return /quotagate_units_unreadable_total\{quota="System",restriction="0"\} (\d+)/.exec(metrics)?.[1] ?? '0';
};
