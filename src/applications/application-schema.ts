import { z } from 'zod';

/**
 * What an application made through the portal API is, said once: the API validates bodies with these
 * schemas (and documents them from them), and the stores write and read records through them. Keys are
 * kept as SHA-256 digests only: a key is 32 random bytes, so a fast digest is as good as a slow hash, and
 * the gateway compares digests already.
 */

const uuid = z
  .string({ error: 'must be a lower-case UUID' })
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, {
    error: 'must be a lower-case UUID',
  });
const createdOn = z
  .int({ error: 'must be a whole number of milliseconds since the epoch' })
  .nonnegative({ error: 'must be a whole number of milliseconds since the epoch' });

export const environments = ['development', 'production'] as const;
/** Which key of each application is in force: NODE_ENV=production selects `apikey_production`. */
export type Environment = (typeof environments)[number];

export const storedKeySchema = z.strictObject({
  id: uuid,
  /** Hex SHA-256 of the key. */
  digest: z
    .string({ error: 'must be a hex SHA-256 digest' })
    .regex(/^[0-9a-f]{64}$/, { error: 'must be a hex SHA-256 digest' }),
  environment: z.enum(environments, { error: 'must be development or production' }),
  enabled: z.boolean({ error: 'must be true or false' }),
  /** Milliseconds since the epoch. */
  createdOn,
});

const name = z
  .string({ error: 'must be a string' })
  .trim()
  .min(1, { error: 'must be 1 to 200 characters' })
  .max(200, { error: 'must be 1 to 200 characters' })
  // Names go into log lines and metric labels: no control characters, no lone surrogates.
  .refine((value) => !/[\p{Cc}\p{Cs}]/u.test(value), {
    error: 'must be text without control characters',
  });
const description = z
  .string({ error: 'must be a string' })
  .max(2000, { error: 'must be at most 2000 characters' });
const enabled = z.boolean({ error: 'must be true or false' });

export const storedApplicationSchema = z.strictObject({
  id: uuid,
  name,
  description,
  enabled,
  createdOn,
  keys: z
    .array(storedKeySchema, { error: 'must be a list of keys' })
    .max(100, { error: 'must be at most 100 keys' }),
});

/**
 * The body of POST and PUT /applications: API Manager's ClientApplication, of which the fields the
 * gateway has are read (name, description, enabled); the others it sends (email, phone, organizationId,
 * state, image, …) mean nothing here and are dropped rather than refused, so that its clients' bodies
 * are accepted as they are.
 */
export const applicationBodySchema = z.object(
  {
    name: name.meta({ description: 'The name people see (access log, metrics, the admin API)' }),
    description: description.optional().meta({ description: 'Default: empty' }),
    enabled: enabled.optional().meta({ description: 'false: its keys are refused (default true)' }),
  },
  { error: 'must be an object' },
);

export const apiKeyBodySchema = z.strictObject(
  {
    environment: z
      .enum(environments, { error: 'must be development or production' })
      .optional()
      .meta({ description: "The environment whose requests the key opens (default: the gateway's)" }),
    enabled: enabled.optional().meta({ description: 'false: the key is refused (default true)' }),
  },
  { error: 'must be an object' },
);

export type StoredKey = z.output<typeof storedKeySchema>;
export type StoredApplication = z.output<typeof storedApplicationSchema>;
export type ApplicationBody = z.output<typeof applicationBodySchema>;
export type ApiKeyBody = z.output<typeof apiKeyBodySchema>;
