import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { LiveConfig } from '../config/live-config.js';
import { isDate, rangeProblems, type UsageHistoryStore, type UsageRow } from '../quota/usage-history.js';
import { AdminError, errorResponses } from './admin-errors.js';

export interface UsageHistoryRoutesParts {
  live: LiveConfig;
  /** The store's history; null where the history cannot be read (answered 503). */
  history: UsageHistoryStore | null;
}

const date = z.string().refine(isDate, { error: 'must be a date as YYYY-MM-DD' });
const rangeQuery = z.object({
  from: date.meta({ description: 'The first day, YYYY-MM-DD, in the calendar of usageHistory.timeZone' }),
  to: date.meta({ description: 'The last day, included' }),
});
const allQuery = rangeQuery.extend({
  api: z.string().max(200, { error: 'must be at most 200 characters' }).optional().meta({
    description: "Only this API's lines (the catalog's id)",
  }),
});
const idParams = z.object({ id: z.string().max(200, { error: 'must be at most 200 characters' }) });

const count = (description: string) => ({ type: 'integer', minimum: 0, description });
const rows = {
  description: 'One line per day, application, API and method, by date, then application, API and method',
  type: 'array',
  items: {
    type: 'object',
    required: ['date', 'application', 'api', 'method', 'admitted', 'refused', 'bytesIn', 'bytesOut', 'units'],
    properties: {
      date: { type: 'string', description: 'YYYY-MM-DD, in the calendar of usageHistory.timeZone' },
      application: {
        type: 'string',
        nullable: true,
        description: "The application's id; null for the callers of a public API (auth none)",
      },
      api: { type: 'string', description: "The catalog's id of the API" },
      method: {
        type: 'string',
        nullable: true,
        description:
          "The catalog's id of the method; null for a request that matched none of the API's methods",
      },
      admitted: count('Requests the quota check admitted (forwarded upstream)'),
      refused: count('Requests the quota check refused (429)'),
      bytesIn: count("Bytes of the requests' bodies, as the access lines count them"),
      bytesOut: count('Bytes of the answers, as the access lines count them'),
      units: count(
        'Units the answers said (throttleunits), the most one restriction was charged per request',
      ),
    },
  },
};

type RangeRequest = FastifyRequest<{ Querystring: z.output<typeof allQuery> }>;
type ApplicationRangeRequest = FastifyRequest<{
  Querystring: z.output<typeof rangeQuery>;
  Params: { id: string };
}>;

/**
 * The usage history (docs/quotas.md, "Usage history"), as AWS API Gateway's `GetUsage` answers it: per
 * application, API, method and day, for a range of days. One application's to admins and members; every
 * application's to admins.
 */
export function registerUsageHistoryRoutes(app: FastifyInstance, parts: UsageHistoryRoutesParts): void {
  const read = (query: { from: string; to: string; api?: string }): Promise<UsageRow[]> => {
    const problems = rangeProblems(query.from, query.to, parts.live.config.usageHistory.days);
    if (problems.length > 0) throw new AdminError(400, problems);
    if (!parts.history) throw new AdminError(503, ['the usage history cannot be read here']);
    return parts.history.read(query);
  };

  app.get(
    '/applications/:id/usage/history',
    {
      schema: {
        summary: "An application's usage per API, method and day",
        operationId: 'getApplicationUsageHistory',
        tags: ['applications'],
        params: idParams,
        querystring: rangeQuery,
        response: { 200: rows, ...errorResponses },
      },
    },
    async (request: ApplicationRangeRequest) => {
      const id = request.params.id.toLowerCase();
      const { from, to } = request.query;
      return (await read({ from, to })).filter((row) => row.application?.toLowerCase() === id);
    },
  );

  app.get(
    '/usage/history',
    {
      schema: {
        summary: "Every application's usage per API, method and day (API Administrators)",
        operationId: 'getUsageHistory',
        tags: ['applications'],
        querystring: allQuery,
        response: { 200: rows, ...errorResponses },
      },
    },
    async (request: RangeRequest) => {
      if (request.adminUser?.role !== 'admin')
        throw new AdminError(403, ['only an API Administrator may do this']);
      const { from, to, api } = request.query;
      return read({ from, to, ...(api === undefined ? {} : { api }) });
    },
  );
}
