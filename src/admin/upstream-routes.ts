import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiUpstream } from '../console/logic/upstreams.js';
import { errorResponses } from './admin-errors.js';

const targetStateSchema = z.object({
  url: z.string().meta({
    description:
      'The target as configured (origin and path), or for each address its host name resolved to (upstream.dnsRefresh), the configured URL with that address in place of the name',
  }),
  host: z.string().nullable().meta({
    description:
      "The configured host (name and port) url's address was resolved from; null when url is as configured",
  }),
  weight: z.number().int().meta({ description: 'Its share of the exchanges (1 for the one-URL form)' }),
  healthy: z.boolean().meta({
    description:
      "Whether the health checks find it healthy (every data plane's); always true without healthCheck",
  }),
  ejected: z.boolean().meta({
    description:
      "Whether outlier detection has it ejected now (any data plane's); false without outlierDetection",
  }),
  ejections: z.number().int().meta({ description: 'Times outlier detection ejected it since the start' }),
  inFlight: z.number().int().meta({ description: 'Exchanges sent to it and not yet answered, now' }),
  requests: z.number().int().meta({ description: 'Exchanges sent to it since the start, retries included' }),
  failures: z.number().int().meta({
    description: 'Exchanges to it that failed without an answer (refused, reset, timed out, invalid)',
  }),
  retries: z.number().int().meta({ description: 'Exchanges sent to it after another target failed them' }),
});

/** The answer of `GET /upstreams`, for its OpenAPI document; the compiler holds it to `ApiUpstream`. */
const upstreamsSchema = z.array(
  z.object({
    api: z.string().meta({ description: "The API's id" }),
    name: z.string().meta({ description: "The API's name" }),
    balance: z
      .enum(['round-robin', 'least-requests'])
      .nullable()
      .meta({ description: 'The balance policy of a pool; null for an API of one URL' }),
    healthCheck: z.boolean().meta({ description: 'Whether its targets are health-checked' }),
    targets: z.array(targetStateSchema),
  }),
) satisfies z.ZodType<ApiUpstream[]>;

/**
 * `GET /upstreams`: each API's targets as the data planes know them now (their health, their exchanges
 * in flight, what was sent to them), for operators and the console's API documentation tab. Any admin
 * user may read it, as the catalog's own document.
 */
export interface UpstreamRouteParts {
  /** The targets of the APIs and what the data planes know of them now. */
  upstreams: () => Promise<ApiUpstream[]>;
}

export function registerUpstreamRoutes(app: FastifyInstance, parts: UpstreamRouteParts): void {
  app.get(
    '/upstreams',
    {
      schema: {
        summary:
          "Each API's upstream targets and their state now: weight, health, exchanges in flight, and what was sent to them",
        operationId: 'getUpstreams',
        tags: ['upstreams'],
        response: {
          200: {
            description:
              'One entry per API of the config in force, in its order; an API of one URL lists that URL as its one target',
            ...(z.toJSONSchema(upstreamsSchema, { io: 'output', target: 'openapi-3.0' }) as Record<
              string,
              unknown
            >),
          },
          ...errorResponses,
        },
      },
    },
    () => parts.upstreams(),
  );
}
