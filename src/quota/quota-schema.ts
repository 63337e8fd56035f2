import { z } from 'zod';
import { didYouMean, discriminatorOf, oneOf } from '../kit/key-suggestions.js';
import { calendarPeriods, isTimeZone, latestStartDay } from '../kit/calendar-window.js';
import { referenceProblem, type CatalogIds } from './catalog-references.js';
import {
  applicationDefaultQuotaId,
  largestUnits,
  longestApplicationId,
  longestWindowMs,
  periodNames,
  quotaTypes,
  restrictionModes,
  restrictionTypes,
  restrictionVerbs,
  restrictionWindows,
  calendarOnlyPeriods,
  periodOf,
  systemQuotaId,
  wellKnownQuotaIds,
  windowMs,
} from './quota-terms.js';
import { mostUnitPaths, unitPathRule, unitPathsProblem } from './unit-paths.js';

/**
 * What a quota is, said once. The Quota API validates request bodies with it (and documents them from
 * it), the stores write records through it and read them back through it, and the limiter takes its
 * limits from it: nothing is accepted that cannot be stored, reloaded and enforced as it was written.
 *
 * Numbers arrive as JSON numbers or strings and leave as canonical strings (no exponent, no leading or
 * trailing zeros). The limits follow from what the `RateLimit-Policy` header can carry: its `q` is an
 * RFC 8941 integer of at most 15 digits, in messages for `throttle` and in bytes for `throttlemb`.
 *
 * `throttleunits`, `concurrency`, `mode` and `by` are extensions, absent from Axway's shapes: an Axway client never
 * sends them, and sees them only in a quota someone gave them to.
 */

const bytesPerMb = 1_048_576;

/** The rule of each number of a restriction's config, as its messages say it. */
export const amountRules = {
  messages: 'must be a whole number from 1 to 1000000000000',
  per: 'must be a whole number from 1 to 1000000',
  mb: 'must be a number of megabytes from 0.000001 to 953674316.406249, with at most 6 decimals',
  units: 'must be a whole number from 1 to 999999999999999',
  default: 'must be a whole number from 0 to 999999999999999',
  connections: 'must be a whole number from 1 to 1000000',
} as const;
type AmountField = keyof typeof amountRules;
const largest: Record<AmountField, bigint> = {
  messages: 1_000_000_000_000n,
  per: 1_000_000n,
  mb: BigInt(largestUnits),
  units: BigInt(largestUnits),
  default: BigInt(largestUnits),
  connections: 1_000_000n,
};
/** The least of each field: only a charge when the upstream says nothing may be 0. */
const least = (field: AmountField) => (field === 'default' ? 0n : 1n);

/** A number as JSON.parse read it, spelt without an exponent: 1e-7 → "0.0000001", 1e21 → "1" and 21 zeros. */
function plainDecimal(value: number): string | undefined {
  if (!Number.isFinite(value)) return undefined;
  const text = String(value);
  const match = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(text);
  if (!match) return text;
  const [, sign = '', integer = '', fraction = '', exponent = ''] = match;
  const digits = integer + fraction;
  const point = integer.length + Number(exponent);
  if (point <= 0) return `${sign}0.${'0'.repeat(-point)}${digits}`;
  if (point >= digits.length) return `${sign}${digits}${'0'.repeat(point - digits.length)}`;
  return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
}

/** Whole bytes of `mb` megabytes (a canonical decimal), rounded down, computed exactly. */
function bytesOf(mb: string): bigint {
  const [integer = '0', fraction = ''] = mb.split('.');
  const micro = BigInt(integer) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
  return (micro * BigInt(bytesPerMb)) / 1_000_000n;
}

/**
 * The canonical string of an amount given as a JSON number or a string of digits (whole, or with at most
 * 6 decimals for `mb`), or undefined when it breaks the field's rule. A number is judged by the decimal
 * it reads as, so a JSON number is refused exactly when its spelling as a string would be.
 */
export function canonicalAmount(value: unknown, field: AmountField): string | undefined {
  const text =
    typeof value === 'number' ? plainDecimal(value) : typeof value === 'string' ? value.trim() : undefined;
  const match = text === undefined ? null : /^(\d{1,16})(?:\.(\d{1,6}))?$/.exec(text);
  if (!match || (field !== 'mb' && match[2] !== undefined)) return undefined;
  const integer = match[1]!.replace(/^0+(?=\d)/, '');
  const fraction = (match[2] ?? '').replace(/0+$/, '');
  const canonical = fraction ? `${integer}.${fraction}` : integer;
  const units = field === 'mb' ? bytesOf(canonical) : BigInt(integer);
  return units >= least(field) && units <= largest[field] ? canonical : undefined;
}

/**
 * The limit a restriction enforces: messages for `throttle`, whole bytes for `throttlemb`, units for
 * `throttleunits`, requests in flight for `concurrency`.
 */
export function unitsOf(config: RestrictionConfig): number {
  if (config.messages !== undefined) return Number(config.messages);
  if (config.units !== undefined) return Number(config.units);
  if (config.connections !== undefined) return Number(config.connections);
  return Number(bytesOf(config.mb));
}

/** How the canonical strings look, for the OpenAPI document. */
const canonicalPatterns: Record<AmountField, RegExp> = {
  messages: /^[1-9]\d{0,12}$/,
  per: /^[1-9]\d{0,6}$/,
  mb: /^(0|[1-9]\d{0,8})(\.\d{0,5}[1-9])?$/,
  units: /^[1-9]\d{0,14}$/,
  default: /^(0|[1-9]\d{0,14})$/,
  connections: /^([1-9]\d{0,5}|1000000)$/,
};

/** An error map: "is required" for a missing value, `message` for any other mistake. */
const msg =
  (message: string) =>
  (issue: { input?: unknown }): string =>
    issue.input === undefined ? 'is required' : message;

const amount = (field: AmountField, description: string) =>
  z
    .union([z.string(), z.number()], { error: msg(amountRules[field]) })
    .transform((value, ctx) => {
      const canonical = canonicalAmount(value, field);
      if (canonical === undefined) {
        ctx.issues.push({ code: 'custom', message: amountRules[field], input: value });
        return z.NEVER;
      }
      return canonical;
    })
    .pipe(z.string().regex(canonicalPatterns[field]))
    .meta({
      description: `${description}: ${amountRules[field].replace(/^must be /, '')}; a JSON number or a string, answered as a string`,
    });

const notFor = (type: string) => z.never({ error: `not allowed for type ${type}` }).optional();

const period = z
  .enum(periodNames, { error: oneOf(`must be one of ${periodNames.join(', ')}`, periodNames) })
  .meta({ description: 'Unit of the window, singular or plural, kept as sent' });

/**
 * How the window counts, and for a calendar window where its days begin: extensions, absent from
 * Axway's shapes, and answered absent when sliding (the default) so that Axway clients see no change.
 */
const windowFields = {
  window: z
    .enum(restrictionWindows, {
      error: oneOf(`must be one of ${restrictionWindows.join(', ')}`, restrictionWindows),
    })
    .optional()
    .transform((window) => (window === 'calendar' ? window : undefined))
    .pipe(z.literal('calendar').optional())
    .meta({
      description:
        'sliding (the default, answered absent): any interval of the window holds at most the limit; calendar: the day, ISO week (from Monday), month or year that holds now, in timeZone, holds at most the limit, and the whole limit is there again at its end',
    }),
  timeZone: z
    .string({ error: msg('must be an IANA time zone') })
    .refine(isTimeZone, { error: 'must be an IANA time zone (Europe/Berlin) or UTC' })
    .optional()
    .meta({
      description: 'window: calendar only: the IANA time zone whose midnight starts each day (default UTC)',
    }),
  startDay: z
    .int({ error: msg(`must be a whole number from 1 to ${latestStartDay}`) })
    .min(1, { error: `must be a whole number from 1 to ${latestStartDay}` })
    .max(latestStartDay, { error: `must be a whole number from 1 to ${latestStartDay}` })
    .optional()
    .meta({
      description: `window: calendar and period: month only: the day of the month each window starts on, the billing day, 1 to ${latestStartDay} (default 1)`,
    }),
};

interface WindowConfig {
  per: string;
  period: string;
  window?: 'calendar' | undefined;
  timeZone?: string | undefined;
  startDay?: number | undefined;
}

const windowRule = (config: WindowConfig, ctx: z.RefinementCtx) => {
  const period = periodOf(config.period);
  if (config.window !== 'calendar') {
    if (calendarOnlyPeriods.has(period))
      ctx.addIssue({
        code: 'custom',
        path: ['period'],
        message: `${period} is a calendar period: give window: calendar (a sliding ${period} has no fixed length)`,
      });
    else if (windowMs(config) > longestWindowMs)
      ctx.addIssue({ code: 'custom', message: 'the window (per × period) must not exceed 366 days' });
    for (const field of ['timeZone', 'startDay'] as const)
      if (config[field] !== undefined)
        ctx.addIssue({ code: 'custom', path: [field], message: 'is allowed only with window: calendar' });
    return;
  }
  if (!(calendarPeriods as readonly string[]).includes(period))
    ctx.addIssue({
      code: 'custom',
      path: ['period'],
      message: `must be one of ${calendarPeriods.join(', ')} for a calendar window`,
    });
  if (config.per !== '1')
    ctx.addIssue({
      code: 'custom',
      path: ['per'],
      message: 'must be 1 for a calendar window: it is one day, week, month or year of the calendar',
    });
  if (config.startDay !== undefined && period !== 'month')
    ctx.addIssue({ code: 'custom', path: ['startDay'], message: 'is allowed only with period: month' });
};

const throttleConfig = z
  .strictObject(
    {
      messages: amount('messages', 'Messages allowed per window'),
      per: amount('per', 'Number of periods in the window'),
      period,
      ...windowFields,
      mb: notFor('throttle'),
      units: notFor('throttle'),
      header: notFor('throttle'),
      body: notFor('throttle'),
      default: notFor('throttle'),
      connections: notFor('throttle'),
    },
    { error: msg('must be an object') },
  )
  .superRefine(windowRule);

const throttlembConfig = z
  .strictObject(
    {
      mb: amount('mb', 'Megabytes (1,048,576 bytes) allowed per window'),
      per: amount('per', 'Number of periods in the window'),
      period,
      ...windowFields,
      messages: notFor('throttlemb'),
      units: notFor('throttlemb'),
      header: notFor('throttlemb'),
      body: notFor('throttlemb'),
      default: notFor('throttlemb'),
      connections: notFor('throttlemb'),
    },
    { error: msg('must be an object') },
  )
  .superRefine(windowRule);

/** An HTTP field name (RFC 9110 §5.1), compared in lower case as Node and undici give them. */
const fieldName = z
  .string({ error: msg('must be an HTTP field name') })
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/, {
    error: 'must be an HTTP field name of at most 64 characters',
  })
  .toLowerCase()
  .meta({ description: 'The response header or trailer that says what the exchange cost, in units' });

/** What a unit path is, as the messages about `body` say it. */
const unitPathText = unitPathRule.replace(/^must be /, '');

/**
 * Where in a JSON answer, or in each JSON event of a `text/event-stream` answer, the upstream says what the
 * exchange cost: one path, or a list of paths whose values are added. Kept as written; the rule is the
 * body reader's own (`unitPathsProblem`), so nothing is stored that it cannot read.
 */
const unitBody = z
  .union([z.string(), z.array(z.string())], {
    error: msg(`must be a path, or a list of 1 to ${mostUnitPaths} paths, of ${unitPathText}`),
  })
  .superRefine((paths, ctx) => {
    const problem = unitPathsProblem(paths);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .meta({
    description: `JSON paths in the answer body (or in each JSON event of an event stream, the last value of each path winning) whose values, added, say what the exchange cost, in units: one path or a list of 1 to ${mostUnitPaths}, each of ${unitPathText}; the header or trailer wins when it holds a whole number`,
  });

/** A throttleunits restriction reads what an exchange cost from somewhere: a field, the body, or both. */
const unitSourceRule = (config: { header?: string; body?: unknown }, ctx: z.RefinementCtx) => {
  if (config.header === undefined && config.body === undefined)
    ctx.addIssue({ code: 'custom', path: ['header'], message: 'is required unless body is given' });
};

const throttleunitsConfig = z
  .strictObject(
    {
      units: amount('units', 'Units allowed per window'),
      per: amount('per', 'Number of periods in the window'),
      period,
      ...windowFields,
      header: fieldName.optional(),
      body: unitBody.optional(),
      default: amount(
        'default',
        'Units charged when neither the header nor the body says a whole number (default: 0)',
      ).optional(),
      messages: notFor('throttleunits'),
      mb: notFor('throttleunits'),
      connections: notFor('throttleunits'),
    },
    { error: msg('must be an object') },
  )
  .superRefine(windowRule)
  .superRefine(unitSourceRule);

/** Requests in flight at once: no window, so none of the fields that make one. */
const concurrencyConfig = z.strictObject(
  {
    connections: amount('connections', 'Requests of its scope in flight at once'),
    messages: notFor('concurrency'),
    mb: notFor('concurrency'),
    units: notFor('concurrency'),
    header: notFor('concurrency'),
    body: notFor('concurrency'),
    default: notFor('concurrency'),
    per: notFor('concurrency'),
    period: notFor('concurrency'),
    window: notFor('concurrency'),
    timeZone: notFor('concurrency'),
    startDay: notFor('concurrency'),
  },
  { error: msg('must be an object') },
);

const byRule = 'must be client, or header: and an HTTP field name of at most 64 characters (header:X-Tenant)';
const byPattern = /^(client|header:[!#$%&'*+.^_`|~0-9a-z-]{1,64})$/;

/**
 * Whose count each count is: `client` (the client address) or `header:<name>` (each value of that request
 * header), the name kept in lower case as Node gives header names. Absent when unused, so that Axway
 * clients see the restrictions they know.
 */
const callerKey = z
  .string({ error: msg(byRule) })
  .transform((by, ctx) => {
    const canonical = /^header:/i.test(by) ? `header:${by.slice('header:'.length).toLowerCase()}` : by;
    if (!byPattern.test(canonical)) {
      ctx.issues.push({ code: 'custom', message: byRule, input: by });
      return z.NEVER;
    }
    return canonical;
  })
  .pipe(z.string().regex(byPattern))
  .optional()
  .meta({
    description:
      'Whose count each count is: client (each client address apart, IPv6 per /64) or header:<name> (each value of that request header apart, by client address without it); absent: all traffic for an API quota, each application for an application quota',
  });

/** An id of the catalog, as the client spells it: the restriction keeps it in lower case (`lowerCaseIds`). */
const catalogId = (what: string) =>
  z
    .string({ error: msg('must be a string') })
    .min(1, { error: 'must be 1 to 64 characters' })
    .max(64, { error: 'must be 1 to 64 characters' })
    .meta({ description: what });

/** Catalog ids match in any case and are kept in lower case, once the catalog rule has read them as given. */
const lowerCaseIds = <T extends { api: string; method: string }>(restriction: T): T => ({
  ...restriction,
  api: restriction.api.toLowerCase(),
  method: restriction.method.toLowerCase(),
});

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

/**
 * The catalog restrictions may name, read when a body is checked: a reload may have changed it since
 * the schema was built.
 */
export type CatalogSource = () => CatalogIds;

/** `method` must be `*` under `api: *`; with a catalog, both must name ids of it. */
function referencesRule(catalogSource: CatalogSource | undefined) {
  return (restriction: { api: string; method: string }, ctx: z.RefinementCtx) => {
    const { api, method } = restriction;
    if (api === '*') {
      if (method !== '*')
        ctx.addIssue({ code: 'custom', path: ['method'], message: 'must be * when api is *' });
      return;
    }
    const catalog = catalogSource?.();
    const problem = catalog && referenceProblem(catalog, api, method);
    if (problem) ctx.addIssue({ code: 'custom', path: [problem.field], message: problem.message });
  };
}

function restrictionSchema(catalog?: CatalogSource) {
  const fields = {
    api: catalogId('Catalog API id, or * for every API'),
    method: catalogId('Catalog method id of that API, or * for every method (must be * when api is *)'),
    verb: z
      .enum(restrictionVerbs, {
        error: oneOf(`must be one of ${restrictionVerbs.join(', ')}`, restrictionVerbs),
      })
      .optional()
      .meta({ description: 'Only requests with this verb; every verb when absent' }),
    // `enforce` is the default and is answered as it is stored, absent, so that Axway clients see the
    // restrictions they know; only a shadow restriction says so.
    mode: z
      .enum(restrictionModes, {
        error: oneOf(`must be one of ${restrictionModes.join(', ')}`, restrictionModes),
      })
      .optional()
      .transform((mode) => (mode === 'shadow' ? mode : undefined))
      .pipe(z.literal('shadow').optional())
      .meta({
        description:
          'enforce (the default, answered absent): refuse what has no room; shadow: count exactly as enforce would, never refuse, and report what would have been refused',
      }),
    by: callerKey,
  };
  // The catalog rule runs even when the config has mistakes, so that one answer names them all.
  const references = {
    when: (payload: { value: unknown }) =>
      isRecord(payload.value) &&
      typeof payload.value.api === 'string' &&
      typeof payload.value.method === 'string',
  };
  return z.discriminatedUnion(
    'type',
    [
      z
        .strictObject({ ...fields, type: z.literal('throttle'), config: throttleConfig })
        .superRefine(referencesRule(catalog), references)
        .overwrite(lowerCaseIds),
      z
        .strictObject({ ...fields, type: z.literal('throttlemb'), config: throttlembConfig })
        .superRefine(referencesRule(catalog), references)
        .overwrite(lowerCaseIds),
      z
        .strictObject({ ...fields, type: z.literal('throttleunits'), config: throttleunitsConfig })
        .superRefine(referencesRule(catalog), references)
        .overwrite(lowerCaseIds),
      z
        .strictObject({ ...fields, type: z.literal('concurrency'), config: concurrencyConfig })
        .superRefine(referencesRule(catalog), references)
        .overwrite(lowerCaseIds),
    ],
    {
      // A restriction that is no object at all comes here too, as an invalid_type issue.
      error: (issue: { code: string; input?: unknown; discriminator?: string }) => {
        if (issue.code === 'invalid_type')
          return issue.input === undefined ? 'is required' : 'must be an object';
        return isRecord(issue.input) && issue.input.type === undefined
          ? 'is required'
          : `must be one of ${restrictionTypes.join(', ')}${didYouMean(discriminatorOf(issue), restrictionTypes)}`;
      },
    },
  );
}

const thresholdsRule = 'must be an array of whole percentages from 1 to 100, each once, in ascending order';

/**
 * Percentages of a restriction's limit whose crossing, within a window, sends an alert to each webhook of
 * `notifications` (docs/quotas.md, "Alerts"): set on a quota, they replace the webhooks' own for its
 * restrictions.
 */
export const alertThresholdsSchema = z
  .array(
    z.int({ error: thresholdsRule }).min(1, { error: thresholdsRule }).max(100, { error: thresholdsRule }),
    {
      error: msg(thresholdsRule),
    },
  )
  .min(1, { error: thresholdsRule })
  .max(100, { error: thresholdsRule })
  .refine((list) => list.every((value, i) => i === 0 || value > list[i - 1]!), { error: thresholdsRule });

function quotaFields(catalog?: CatalogSource) {
  return {
    type: z.enum(quotaTypes, { error: oneOf(`must be one of ${quotaTypes.join(', ')}`, quotaTypes) }),
    name: z
      .string({ error: msg('must be a string') })
      .min(1, { error: 'must be 1 to 200 characters' })
      .max(200, { error: 'must be 1 to 200 characters' }),
    description: z
      .string({ error: msg('must be a string') })
      .max(2000, { error: 'must be at most 2000 characters' })
      .default(''),
    restrictions: z
      .array(restrictionSchema(catalog), { error: msg('must be an array') })
      .max(100, { error: 'must hold at most 100 restrictions' }),
    thresholds: alertThresholdsSchema.optional().meta({
      description:
        "Percentages of each restriction's limit that send an alert to the webhooks of `notifications` (replacing theirs)",
    }),
  };
}

/**
 * A QuotaDTO, the body of POST and PUT: with `catalog`, restrictions must name its APIs and methods.
 * A client's `id` and `system` are accepted and ignored.
 */
export function quotaDtoSchema(catalog?: CatalogSource) {
  const { type, name, description, restrictions, thresholds } = quotaFields(catalog);
  return z.strictObject(
    {
      id: z
        .string({ error: msg('must be a string') })
        .optional()
        .meta({ description: 'Ignored: the server assigns ids' }),
      type,
      name,
      description,
      restrictions,
      thresholds,
      system: z
        .boolean({ error: msg('must be true or false') })
        .optional()
        .meta({ description: 'Ignored: only the well-known quotas are system quotas' }),
    },
    { error: msg('must be an object') },
  );
}

/**
 * A UUID a client or a file gives, in any case, read in lower case as the stores keep ids.
 * @param typeError what a value that is no string is told
 */
export const anyCaseUuid = (
  error: string,
  typeError: z.core.$ZodErrorMap | string = msg('must be a string'),
) =>
  z
    .string({ error: typeError })
    .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, { error })
    .transform((id) => id.toLowerCase());

/**
 * The body of an application's own quota (POST and PUT /applications/{id}/quota): a QuotaDTO whose
 * `type` and `name` may be left out, as Axway API Manager accepts (apim-cli sends the restrictions
 * alone); the type is APPLICATION and the name is made up from the application's.
 */
export function applicationQuotaDtoSchema(catalog?: CatalogSource) {
  const dto = quotaDtoSchema(catalog);
  return dto
    .extend({
      type: dto.shape.type.optional().meta({ description: 'APPLICATION (the default)' }),
      name: dto.shape.name.optional().meta({ description: "Default: the application's name and ' quota'" }),
      restrictions: dto.shape.restrictions
        .optional()
        .meta({ description: 'The restrictions of its own quota; required unless `plan` is given' }),
      plan: anyCaseUuid('must be the id (a UUID) of a plan').optional().meta({
        description:
          'Puts the application on this plan (the id of an APPLICATION quota that no application owns) instead of giving it restrictions of its own',
      }),
    })
    .superRefine((body, ctx) => {
      if (body.plan === undefined && body.restrictions === undefined)
        ctx.addIssue({ code: 'custom', path: ['restrictions'], message: 'is required (or give a plan)' });
      if (body.plan !== undefined && body.restrictions !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['restrictions'],
          message: "must be left out with a plan: an application on a plan has the plan's restrictions",
        });
    });
}

const quotaId = z
  .string({ error: msg('must be a string') })
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, {
    error: 'must be a lower-case UUID',
  });

/** A Quota as the API answers it. */
export const quotaSchema = z.strictObject(
  {
    id: quotaId,
    ...quotaFields(),
    system: z.boolean({ error: msg('must be true or false') }),
  },
  { error: msg('must be an object') },
);

/** A Quota as the API answers it: an application's own quota says whose it is. */
export const quotaAnswerSchema = quotaSchema.extend({
  application: z
    .strictObject({ id: z.string(), name: z.string() })
    .optional()
    .meta({ description: "The application whose own quota this is, with the config's name for it" }),
  declared: z.literal(true).optional().meta({
    description: 'Declared in conf/ (quotas): read-only through the API, changed there and reloaded',
  }),
  plan: z
    .strictObject({ id: z.string(), name: z.string() })
    .optional()
    .meta({ description: "An application's quota when the application is on a plan: the plan it is on" }),
  applicationCount: z.int().min(0).optional().meta({
    description: 'A plan (an APPLICATION quota no application owns): how many applications are on it',
  }),
});

/**
 * A quota as the stores keep it: its fields in this order, the application it belongs to and, for an
 * application put on a plan, the plan. That membership is the application's own record, so that the
 * one-record-per-application rule of the stores covers it and every gateway follows it as it follows
 * quotas; its restrictions are the plan's, never its own (see plans.ts).
 */
export const storedRecordSchema = quotaSchema
  .extend({
    application: z
      .string({ error: msg('must be a string') })
      .min(1, { error: `must be 1 to ${longestApplicationId} characters` })
      .max(longestApplicationId, { error: `must be 1 to ${longestApplicationId} characters` })
      .optional(),
    plan: quotaId.optional(),
  })
  .superRefine((record, ctx) => {
    if (record.plan !== undefined && (record.application === undefined || record.restrictions.length > 0)) {
      ctx.addIssue({
        code: 'custom',
        path: ['plan'],
        message: "only an application's record without restrictions of its own can name a plan",
      });
    }
    const wellKnown = wellKnownQuotaIds.has(record.id);
    if (record.system !== wellKnown) {
      ctx.addIssue({
        code: 'custom',
        path: ['system'],
        message: 'must be true for the System and Application Default quotas, and false for any other',
      });
    }
    if (record.id === systemQuotaId && record.type !== 'API')
      ctx.addIssue({ code: 'custom', path: ['type'], message: 'must be API for the System quota' });
    if (record.id === applicationDefaultQuotaId && record.type !== 'APPLICATION') {
      ctx.addIssue({
        code: 'custom',
        path: ['type'],
        message: 'must be APPLICATION for the Application Default quota',
      });
    }
    if (record.application !== undefined && (record.type !== 'APPLICATION' || wellKnown)) {
      ctx.addIssue({
        code: 'custom',
        path: ['application'],
        message:
          'only a quota of type APPLICATION that is not a well-known quota can belong to an application',
      });
    }
  });

/** A request body that passed the QuotaDTO schema: numbers canonical, ids lower case. */
export type QuotaDto = z.output<ReturnType<typeof quotaDtoSchema>>;
export type ApplicationQuotaDto = z.output<ReturnType<typeof applicationQuotaDtoSchema>>;
export type Quota = z.output<typeof quotaSchema>;
export type Restriction = Quota['restrictions'][number];
export type RestrictionConfig = Restriction['config'];

/**
 * A quota as stored: with the application it belongs to, when it is an application's own quota, and the
 * plan (the id of an APPLICATION quota no application owns) when it puts the application on one.
 */
export interface QuotaRecord {
  quota: Quota;
  application?: string;
  plan?: string;
}

/** A stored quota and its entity tag (`ETag`), the SHA-1 of its stored JSON. */
export interface StoredQuota extends QuotaRecord {
  etag: string;
}
