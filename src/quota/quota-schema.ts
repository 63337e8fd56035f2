import { periodNames, quotaTypes, restrictionTypes, restrictionVerbs } from './model.js';

/**
 * JSON Schemas of the Quota API: fastify validates requests with them, and the OpenAPI document is
 * generated from them, so the documentation cannot drift from what is enforced.
 */

const numberLike = {
  anyOf: [{ type: 'string', maxLength: 32 }, { type: 'number' }],
} as const;

export const restrictionDtoSchema = {
  $id: 'RestrictionDTO',
  type: 'object',
  required: ['api', 'method', 'type', 'config'],
  additionalProperties: false,
  properties: {
    api: { type: 'string', minLength: 1, maxLength: 64, description: 'Catalog API id, or * for every API' },
    method: {
      type: 'string',
      minLength: 1,
      maxLength: 64,
      description: 'Catalog method id of that API, or * for every method',
    },
    verb: { type: 'string', enum: [...restrictionVerbs], description: 'Only requests with this verb' },
    type: { type: 'string', enum: [...restrictionTypes] },
    config: {
      type: 'object',
      additionalProperties: false,
      description: 'throttle: messages, per, period; throttlemb: mb, per, period',
      properties: {
        messages: { ...numberLike, description: 'Messages allowed per window (whole number)' },
        mb: { ...numberLike, description: 'Megabytes (1,048,576 bytes) allowed per window' },
        per: { ...numberLike, description: 'Number of periods in the window (whole number)' },
        period: { type: 'string', enum: periodNames },
      },
    },
  },
} as const;

export const quotaDtoSchema = {
  $id: 'QuotaDTO',
  type: 'object',
  required: ['type', 'name', 'restrictions'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', description: 'Ignored: the server assigns ids' },
    system: { type: 'boolean', description: 'Ignored: only the well-known quotas are system quotas' },
    type: { type: 'string', enum: [...quotaTypes] },
    name: { type: 'string', minLength: 1, maxLength: 200 },
    description: { type: 'string', maxLength: 2000 },
    restrictions: { type: 'array', maxItems: 100, items: { $ref: 'RestrictionDTO#' } },
  },
} as const;

const restrictionSchema = {
  $id: 'Restriction',
  type: 'object',
  required: ['api', 'method', 'type', 'config'],
  properties: {
    api: { type: 'string' },
    method: { type: 'string' },
    verb: { type: 'string' },
    type: { type: 'string', enum: [...restrictionTypes] },
    config: {
      type: 'object',
      properties: {
        messages: { type: 'string' },
        mb: { type: 'string' },
        per: { type: 'string' },
        period: { type: 'string' },
      },
    },
  },
} as const;

export const quotaSchema = {
  $id: 'Quota',
  type: 'object',
  required: ['id', 'type', 'name', 'description', 'restrictions', 'system'],
  properties: {
    id: { type: 'string', format: 'uuid' },
    type: { type: 'string', enum: [...quotaTypes] },
    name: { type: 'string' },
    description: { type: 'string' },
    restrictions: { type: 'array', items: { $ref: 'Restriction#' } },
    system: { type: 'boolean' },
  },
} as const;

export const errorSchema = {
  $id: 'Errors',
  type: 'object',
  required: ['errors'],
  properties: {
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['code', 'message'],
        properties: { code: { type: 'integer' }, message: { type: 'string' } },
      },
    },
  },
} as const;

/** Every shared schema, for `fastify.addSchema` (and so for the OpenAPI components). */
export const quotaApiSchemas = [
  restrictionDtoSchema,
  quotaDtoSchema,
  restrictionSchema,
  quotaSchema,
  errorSchema,
];
