import type { ApiConfig } from '../config/schema.js';
import {
  longestWindowMs,
  windowMs,
  type Quota,
  type QuotaType,
  type Restriction,
  type RestrictionConfig,
  type RestrictionType,
} from './model.js';

/** A request body that passed the QuotaDTO JSON Schema. */
export interface QuotaDto {
  type: QuotaType;
  name: string;
  description?: string;
  restrictions: Array<{
    api: string;
    method: string;
    verb?: string;
    type: RestrictionType;
    config: Record<string, string | number | undefined>;
  }>;
}

/** What the catalog offers to restrictions: API ids and, for each, its method ids (all lower case). */
export type CatalogIds = ReadonlyMap<string, ReadonlySet<string>>;

export function catalogIds(apis: readonly ApiConfig[]): CatalogIds {
  return new Map(
    apis.map((api) => [api.id.toLowerCase(), new Set(api.methods.map((method) => method.id.toLowerCase()))]),
  );
}

const limits = {
  messages: { max: 1e12, whole: true, text: 'a whole number from 1 to 1000000000000' },
  mb: { max: 1e9, whole: false, text: 'a number of megabytes above 0 and at most 1000000000' },
  per: { max: 1e6, whole: true, text: 'a whole number from 1 to 1000000' },
} as const;

/** Canonical string of a positive number given as a string or a number, or undefined when it is not one. */
function positiveNumber(value: string | number | undefined, field: keyof typeof limits): string | undefined {
  const { max, whole } = limits[field];
  let number: number;
  if (typeof value === 'number') number = value;
  else if (
    typeof value === 'string' &&
    (whole ? /^\d{1,16}$/ : /^\d{1,16}(\.\d{1,6})?$/).test(value.trim())
  ) {
    number = Number(value.trim());
  } else return undefined;
  if (!Number.isFinite(number) || number <= 0 || number > max || (whole && !Number.isInteger(number)))
    return undefined;
  return String(number);
}

function buildConfig(
  type: RestrictionType,
  config: QuotaDto['restrictions'][number]['config'],
  at: string,
  problems: string[],
): RestrictionConfig | undefined {
  const amountField = type === 'throttle' ? 'messages' : 'mb';
  const otherField = type === 'throttle' ? 'mb' : 'messages';
  if (config[otherField] !== undefined)
    problems.push(`${at}.config.${otherField}: not allowed for type ${type}`);
  const values: Partial<Record<'messages' | 'mb' | 'per', string>> = {};
  for (const field of [amountField, 'per'] as const) {
    if (config[field] === undefined) {
      problems.push(`${at}.config.${field}: is required`);
      continue;
    }
    const canonical = positiveNumber(config[field], field);
    if (canonical === undefined) problems.push(`${at}.config.${field}: must be ${limits[field].text}`);
    else values[field] = canonical;
  }
  const period = config.period;
  if (typeof period !== 'string') problems.push(`${at}.config.period: is required`);
  if (problems.length > 0 || typeof period !== 'string') return undefined;
  const built: RestrictionConfig =
    type === 'throttle'
      ? { messages: values.messages!, per: values.per!, period }
      : { mb: values.mb!, per: values.per!, period };
  if (windowMs(built) > longestWindowMs)
    problems.push(`${at}.config: the window (per × period) must not exceed 366 days`);
  return built;
}

function buildRestriction(
  input: QuotaDto['restrictions'][number],
  at: string,
  catalog: CatalogIds,
  problems: string[],
): Restriction | undefined {
  const api = input.api.toLowerCase();
  const method = input.method.toLowerCase();
  const before = problems.length;
  if (api !== '*' && !catalog.has(api))
    problems.push(`${at}.api: no API of the catalog has id '${input.api}' (or use *)`);
  if (method !== '*') {
    if (api === '*') problems.push(`${at}.method: must be * when api is *`);
    else if (catalog.has(api) && !catalog.get(api)!.has(method)) {
      problems.push(`${at}.method: API '${input.api}' has no method with id '${input.method}' (or use *)`);
    }
  }
  const config = buildConfig(input.type, input.config, at, problems);
  if (problems.length > before || !config) return undefined;
  return { api, method, ...(input.verb ? { verb: input.verb } : {}), type: input.type, config };
}

/**
 * Turns a schema-valid QuotaDTO into a Quota: numbers checked and made canonical strings, catalog
 * references checked. Problems name the field: `restrictions[1].config.per: must be …`.
 */
export function buildQuota(
  dto: QuotaDto,
  identity: { id: string; system: boolean },
  catalog: CatalogIds,
): { quota: Quota } | { problems: string[] } {
  const problems: string[] = [];
  const restrictions = dto.restrictions
    .map((input, i) => buildRestriction(input, `restrictions[${i}]`, catalog, problems))
    .filter((restriction): restriction is Restriction => restriction !== undefined);
  if (problems.length > 0) return { problems };
  return {
    quota: {
      id: identity.id,
      type: dto.type,
      name: dto.name,
      description: dto.description ?? '',
      restrictions,
      system: identity.system,
    },
  };
}
