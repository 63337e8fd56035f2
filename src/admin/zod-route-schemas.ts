import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import { z } from 'zod';
import { applicationBodySchema } from '../applications/application-schema.js';
import { applicationQuotaDtoSchema, quotaAnswerSchema, quotaDtoSchema } from '../quota/quota-schema.js';
import { problemsOf } from '../quota/schema-problems.js';
import { AdminError, errorsJsonSchema } from './admin-errors.js';

/**
 * The admin routes describe their requests with zod schemas, the very ones the stores read records with.
 * fastify validates requests with them (every problem at once, as messages that name the field), and the
 * OpenAPI document is generated from them, so the documentation cannot drift from what is enforced.
 */

const toJsonSchema = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { io, target: 'openapi-3.0' }) as Record<string, unknown>;

/** Schemas that the OpenAPI document shows as named components, and the name of each. */
const componentNames = new WeakMap<z.ZodType, string>();

/** Marks `schema` (a route's body) as the component `name` of the OpenAPI document. */
export function documentedAs<T extends z.ZodType>(schema: T, name: string): T {
  componentNames.set(schema, name);
  return schema;
}

/** The shared JSON Schemas, for `fastify.addSchema`: the named components of the OpenAPI document. */
export function openApiComponents(): Array<Record<string, unknown>> {
  return [
    { $id: 'QuotaDTO', ...toJsonSchema(quotaDtoSchema(), 'input') },
    { $id: 'ApplicationQuotaDTO', ...toJsonSchema(applicationQuotaDtoSchema(), 'input') },
    { $id: 'ApplicationDTO', ...toJsonSchema(applicationBodySchema, 'input') },
    { $id: 'Quota', ...toJsonSchema(quotaAnswerSchema, 'output') },
    errorsJsonSchema,
  ];
}

/** fastify's validator compiler for zod schemas: the parsed (canonical) value replaces the input. */
export const zodValidatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, method, url, httpPart }) => {
  if (!(schema instanceof z.ZodType)) {
    throw new Error(
      `${method} ${url}: the ${httpPart ?? 'request'} schema of an admin route must be a zod schema`,
    );
  }
  const whole = httpPart === 'body' ? 'body' : (httpPart ?? 'request');
  return (data: unknown) => {
    const result = schema.safeParse(data);
    return result.success
      ? { value: result.data }
      : { error: new AdminError(400, problemsOf(result.error.issues, whole, schema)) };
  };
};

/** @fastify/swagger's `transform`: a route's zod schemas as the JSON Schemas of the document. */
export function zodToOpenApi({ schema, url }: { schema?: FastifySchema; url: string }): {
  schema: FastifySchema;
  url: string;
} {
  // Routes without a schema (health, metrics) come without one, whatever the types say.
  if (!schema) return { schema: {}, url };
  const converted: Record<string, unknown> = { ...schema };
  for (const part of ['body', 'params', 'querystring', 'headers'] as const) {
    const value = schema[part];
    if (!(value instanceof z.ZodType)) continue;
    const name = componentNames.get(value);
    converted[part] = name ? { $ref: `${name}#` } : toJsonSchema(value, 'input');
  }
  return { schema: converted, url };
}
