/**
 * The quota form's model and its mapping to and from a QuotaDTO. Amounts stay the text typed: the
 * admin API checks them and its messages, which name the field, are shown next to it.
 */
export type RestrictionType = 'throttle' | 'throttlemb' | 'throttleunits' | 'concurrency';

/** The field of `config` each type's amount is: messages, megabytes, units, requests in flight. */
const amountField: Record<RestrictionType, 'messages' | 'mb' | 'units' | 'connections'> = {
  throttle: 'messages',
  throttlemb: 'mb',
  throttleunits: 'units',
  concurrency: 'connections',
};

/** Whether a restriction of `type` counts over a window (`per` × `period`): all but concurrency. */
export const hasWindow = (type: RestrictionType): boolean => type !== 'concurrency';
export type RestrictionMode = 'enforce' | 'shadow';

export interface RestrictionForm {
  api: string;
  method: string;
  /** '' for every verb. */
  verb: string;
  type: RestrictionType;
  /** `shadow` counts and reports, never refuses. */
  mode: RestrictionMode;
  /** Whose count each count is, as typed: '' for one count, `client` or `header:<Name>`. */
  by: string;
  /** Messages (throttle), megabytes (throttlemb), units (throttleunits) or requests in flight (concurrency), as typed. */
  amount: string;
  /** The window; kept while a concurrency restriction, which has none, is edited. */
  per: string;
  period: string;
  /** `sliding` (the default) or `calendar`: one day, week, month or year of the calendar. */
  window: 'sliding' | 'calendar';
  /** A calendar window's IANA time zone, as typed ('' for UTC). */
  timeZone: string;
  /** A calendar month's billing day, 1 to 28, as typed ('' for the 1st). */
  startDay: string;
  /** throttleunits: the response header or trailer that says what an exchange cost ('' for none). */
  header: string;
  /** throttleunits: the JSON paths in the answer body that say it, separated by commas ('' for none). */
  body: string;
  /** throttleunits: units charged when neither says it, as typed ('' for none). */
  fallback: string;
}

export interface QuotaForm {
  name: string;
  type: 'API' | 'APPLICATION';
  description: string;
  restrictions: RestrictionForm[];
}

/** A quota as the admin API answers it (the parts the form shows). */
export interface QuotaAnswer {
  id: string;
  type: 'API' | 'APPLICATION';
  name: string;
  description: string;
  system: boolean;
  restrictions: Array<{
    api: string;
    method: string;
    verb?: string;
    /** Absent for an enforced restriction. */
    mode?: 'shadow';
    /** Absent for one count (per application for an application quota). */
    by?: string;
    type: RestrictionType;
    config: {
      messages?: string;
      mb?: string;
      units?: string;
      header?: string;
      /** One JSON path, or a list of them. */
      body?: string | string[];
      default?: string;
      connections?: string;
      /** Absent for a concurrency restriction. */
      per?: string;
      period?: string;
      /** Absent for a sliding window. */
      window?: 'calendar';
      timeZone?: string;
      startDay?: number;
    };
  }>;
  application?: { id: string; name: string };
  /** Declared in conf/ (`quotas`): read-only through the API. */
  declared?: true;
  /** An application's quota when the application is on a plan: the plan. */
  plan?: { id: string; name: string };
  /** A plan (an APPLICATION quota no application owns): how many applications are on it. */
  applicationCount?: number;
}

/** `month` and `year` are calendar periods only: the admin API says so when a sliding window has one. */
export const periodChoices = ['second', 'minute', 'hour', 'day', 'week', 'month', 'year'] as const;

export function newRestriction(): RestrictionForm {
  return {
    api: '*',
    method: '*',
    verb: '',
    type: 'throttle',
    mode: 'enforce',
    by: '',
    amount: '',
    per: '1',
    period: 'minute',
    window: 'sliding',
    timeZone: '',
    startDay: '',
    header: '',
    body: '',
    fallback: '',
  };
}

export function formOf(quota: QuotaAnswer): QuotaForm {
  return {
    name: quota.name,
    type: quota.type,
    description: quota.description,
    restrictions: quota.restrictions.map((restriction) => ({
      api: restriction.api,
      method: restriction.method,
      verb: restriction.verb ?? '',
      type: restriction.type,
      mode: restriction.mode ?? 'enforce',
      by: restriction.by ?? '',
      amount: restriction.config[amountField[restriction.type]] ?? '',
      per: restriction.config.per ?? '1',
      // Stored as sent, singular or plural: the form offers the singular.
      period: (restriction.config.period ?? 'minute').replace(/s$/, ''),
      window: restriction.config.window ?? 'sliding',
      timeZone: restriction.config.timeZone ?? '',
      startDay: restriction.config.startDay === undefined ? '' : String(restriction.config.startDay),
      header: restriction.config.header ?? '',
      body: [restriction.config.body ?? []].flat().join(', '),
      fallback: restriction.config.default ?? '',
    })),
  };
}

/** The QuotaDTO of the form, for POST and PUT. */
export function dtoOf(form: QuotaForm): Record<string, unknown> {
  return {
    type: form.type,
    name: form.name.trim(),
    description: form.description,
    restrictions: form.restrictions.map((restriction) => ({
      api: restriction.api,
      method: restriction.api === '*' ? '*' : restriction.method,
      ...(restriction.verb ? { verb: restriction.verb } : {}),
      ...(restriction.mode === 'shadow' ? { mode: 'shadow' } : {}),
      ...(restriction.by.trim() ? { by: restriction.by.trim() } : {}),
      type: restriction.type,
      config: {
        [amountField[restriction.type]]: restriction.amount.trim(),
        ...(hasWindow(restriction.type) ? { per: restriction.per.trim(), period: restriction.period } : {}),
        ...(hasWindow(restriction.type) && restriction.window === 'calendar' ? calendarOf(restriction) : {}),
        ...(restriction.type === 'throttleunits' ? unitSourcesOf(restriction) : {}),
      },
    })),
  };
}

/**
 * A calendar window's fields as the QuotaDTO says them: a time zone or billing day left empty is left
 * out (UTC, the 1st); a billing day is sent as a number when it is digits, else as typed, for the admin
 * API to name.
 */
function calendarOf(restriction: RestrictionForm): Record<string, string | number> {
  const timeZone = restriction.timeZone.trim();
  const startDay = restriction.startDay.trim();
  return {
    window: 'calendar',
    ...(timeZone ? { timeZone } : {}),
    ...(startDay ? { startDay: /^\d+$/.test(startDay) ? Number(startDay) : startDay } : {}),
  };
}

/**
 * Where a throttleunits restriction reads what an exchange cost, and its default, as the QuotaDTO says
 * them: a field left empty is left out (the admin API says when both sources are), one body path is
 * sent as a path, several as a list.
 */
function unitSourcesOf(restriction: RestrictionForm): Record<string, string | string[]> {
  const header = restriction.header.trim();
  const paths = restriction.body
    .split(',')
    .map((path) => path.trim())
    .filter((path) => path !== '');
  const fallback = restriction.fallback.trim();
  return {
    ...(header ? { header } : {}),
    ...(paths.length > 0 ? { body: paths.length === 1 ? paths[0]! : paths } : {}),
    ...(fallback ? { default: fallback } : {}),
  };
}

/**
 * The admin API's messages ("restrictions[0].config.messages: must be …") split by the field they name;
 * `general` holds those that name no field of the form. A message about a restriction's `config` as a
 * whole (the window rule) goes to its `per` field, where the window is typed.
 */
export function messagesByField(
  messages: readonly string[],
  fields: ReadonlySet<string>,
): { byField: Map<string, string[]>; general: string[] } {
  const byField = new Map<string, string[]>();
  const general: string[] = [];
  for (const message of messages) {
    const match = /^([A-Za-z0-9_.[\]]+): (.*)$/s.exec(message);
    let field = match?.[1];
    if (field && !fields.has(field) && /^restrictions\[\d+\]\.config$/.test(field)) field += '.per';
    if (field && /^restrictions\[\d+\]\.config\.(messages|mb|units|connections)$/.test(field)) {
      field = field.replace(/(messages|mb|units|connections)$/, 'amount');
    }
    if (field && /^restrictions\[\d+\]\.config\.default$/.test(field))
      field = field.replace(/default$/, 'fallback');
    if (match && field && fields.has(field)) {
      byField.set(field, [...(byField.get(field) ?? []), match[2]!]);
    } else {
      general.push(message);
    }
  }
  return { byField, general };
}

/** The names of the form's fields, as the admin API's messages name them. */
export function fieldNames(form: QuotaForm): Set<string> {
  const names = new Set(['name', 'type', 'description', 'restrictions']);
  form.restrictions.forEach((_restriction, i) => {
    for (const field of [
      'api',
      'method',
      'verb',
      'mode',
      'by',
      'type',
      'config.amount',
      'config.per',
      'config.period',
      'config.header',
      'config.body',
      'config.fallback',
    ])
      names.add(`restrictions[${i}].${field}`);
    names.add(`restrictions[${i}]`);
  });
  return names;
}
