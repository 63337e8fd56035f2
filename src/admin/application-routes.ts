import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { projectApplicationId } from '../auth/key-ring.js';
import type { LiveConfig } from '../config/live-config.js';
import type { Config } from '../config/schema.js';
import { AdminError, errorResponses } from './admin-errors.js';

export interface ApplicationRoutesParts {
  /** The config in force: its applications (a reload changes them). */
  live: LiveConfig;
}

/** An application as listed, in the shape of Axway API Manager's ClientApplication (no keys in it). */
interface ListedApplication {
  id: string;
  name: string;
  description: string;
  enabled: boolean;
  state: 'approved';
}

const oneOrMore = z.union([z.string(), z.array(z.string())]).optional();
const filterQuery = z.object({
  field: oneOrMore.meta({ description: 'Filter field (name, id, state, enabled); repeat for more filters' }),
  op: oneOrMore.meta({ description: 'eq, or like (contains, any case) for name' }),
  value: oneOrMore.meta({ description: 'The value the field is compared with' }),
});
const listed = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    description: { type: 'string' },
    enabled: { type: 'boolean' },
    state: { type: 'string', enum: ['approved'] },
  },
} as const;

const asList = (value: string | string[] | undefined) =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

/** The applications whose keys the config holds: the project's own and those of `applications`. */
function applicationsOf(config: Readonly<Config>): ListedApplication[] {
  if (config.APIKeyAuthType !== 'basic' && config.APIKeyAuthType !== 'apikey') return [];
  const approved = { enabled: true, state: 'approved' } as const;
  return [
    {
      id: projectApplicationId,
      name: projectApplicationId,
      description: "The project's own key (apikey_development, apikey_production)",
      ...approved,
    },
    ...config.applications.map((app) => ({
      id: app.id,
      name: app.name,
      description: app.description ?? '',
      ...approved,
    })),
  ];
}

type Filter = (application: ListedApplication) => boolean;

/** Axway's filters (`field=name&op=like&value=mob`), each a test every listed application must pass. */
function filtersOf(query: z.output<typeof filterQuery>): Filter[] {
  const [fields, ops, values] = [asList(query.field), asList(query.op), asList(query.value)];
  if (fields.length !== values.length || (ops.length > 0 && ops.length !== fields.length)) {
    throw new AdminError(400, ['query: field, op and value come in threes (op may be left out: eq)']);
  }
  const problems: string[] = [];
  const filters = fields.map((field, i): Filter => {
    const op = ops[i] ?? 'eq';
    const value = values[i]!;
    if (field === 'name' && op === 'like') {
      const needle = value.replace(/^\*|\*$/g, '').toLowerCase();
      return (app) => app.name.toLowerCase().includes(needle);
    }
    if (op !== 'eq')
      problems.push(`op: '${op}' is not supported for ${field} (eq${field === 'name' ? ', like' : ''})`);
    switch (field) {
      case 'name':
        return (app) => app.name === value;
      case 'id':
        return (app) => app.id.toLowerCase() === value.toLowerCase();
      case 'state':
        return (app) => app.state === value;
      case 'enabled':
        return (app) => String(app.enabled) === value;
      default:
        problems.push(
          `field: '${field}' is not a field applications are filtered by here (name, id, state, enabled)`,
        );
        return () => false;
    }
  });
  if (problems.length > 0) throw new AdminError(400, problems);
  return filters;
}

/**
 * The applications, as Axway API Manager lists them (`GET /applications`, with its filters, and one by
 * id): what clients such as apim-cli look applications up with before they read or write their quotas.
 * With the ldap and plugin schemes the applications are the directory's or the plugin's callers, which
 * nobody can list: the list is empty and quotas are addressed by the caller's id.
 */
export function registerApplicationRoutes(app: FastifyInstance, parts: ApplicationRoutesParts): void {
  app.get(
    '/applications',
    {
      schema: {
        summary: 'List the applications (Axway filters: field, op, value)',
        operationId: 'listApplications',
        tags: ['applications'],
        querystring: filterQuery,
        response: {
          200: { description: 'The applications', type: 'array', items: listed },
          ...errorResponses,
        },
      },
    },
    async (request: FastifyRequest<{ Querystring: z.output<typeof filterQuery> }>) => {
      const filters = filtersOf(request.query);
      return applicationsOf(parts.live.config).filter((application) =>
        filters.every((passes) => passes(application)),
      );
    },
  );

  app.get(
    '/applications/:id',
    {
      schema: {
        summary: 'Read an application',
        operationId: 'getApplication',
        tags: ['applications'],
        params: z.object({ id: z.string().max(200, { error: 'must be at most 200 characters' }) }),
        response: { 200: { description: 'The application', ...listed }, ...errorResponses },
      },
    },
    async (request: FastifyRequest<{ Params: { id: string } }>) => {
      const { id } = request.params;
      const found = applicationsOf(parts.live.config).find(
        (application) => application.id.toLowerCase() === id.toLowerCase(),
      );
      if (!found) throw new AdminError(404, [`no application with id '${id}'`]);
      return found;
    },
  );
}
