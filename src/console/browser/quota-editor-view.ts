import {
  dtoOf,
  fieldNames,
  formOf,
  hasWindow,
  messagesByField,
  newRestriction,
  periodChoices,
  type QuotaAnswer,
  type QuotaForm,
  type RestrictionForm,
} from '../logic/quota-form.js';
import { ApiError } from './api.js';
import { quotaRole, type View } from './context.js';
import { h, replace, select } from './dom.js';

const verbs = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * One quota's form: every restriction editable (API and method chosen from the catalog by name), the
 * admin API's messages next to the field they name, and `If-Match` on every change so that a change
 * someone else made first is never overwritten.
 */
export const quotaEditorView: View = async (context, root, id = 'new') => {
  const catalog = await context.catalog();
  const creating = id === 'new';
  let quota: QuotaAnswer | null = null;
  let etag = '';
  if (!creating) {
    const answer = await context.api.call<QuotaAnswer>('GET', `/quotas/${encodeURIComponent(id)}`);
    quota = answer.data;
    etag = answer.etag;
  }
  const form: QuotaForm = quota
    ? formOf(quota)
    : { name: '', type: 'API', description: '', restrictions: [newRestriction()] };
  // A quota declared in conf/ changes there: the API refuses every change to it.
  const declared = quota?.declared === true;
  const readOnly = !context.isAdmin || declared;
  // The well-known quotas and an application's own quota keep their type.
  const typeFixed = quota !== null && (quota.system || quota.application !== undefined);
  const errors = new Map<string, string[]>();
  const banner = h('div', { class: 'form-errors', role: 'alert' });
  const restrictionsBox = h('div', { class: 'restriction-list' });

  const fieldError = (field: string) =>
    h('p', { class: 'field-error', 'data-error-for': field, text: (errors.get(field) ?? []).join('; ') });

  const showErrors = (messages: string[], general: string[] = []) => {
    replace(banner, ...[...general, ...messages].map((message) => h('p', { text: message })));
    banner.hidden = messages.length + general.length === 0;
  };

  const restrictionRow = (restriction: RestrictionForm, i: number): HTMLElement => {
    const at = (field: string) => `restrictions[${i}].${field}`;
    const api = catalog.apis.find(
      (candidate) => candidate.id.toLowerCase() === restriction.api.toLowerCase(),
    );
    const apiChoices: Array<[string, string]> = [
      ['*', 'Every API'],
      ...catalog.apis.map((a): [string, string] => [a.id, a.name]),
    ];
    if (restriction.api !== '*' && !api)
      apiChoices.push([restriction.api, `${restriction.api} (not in the catalog)`]);
    const methodChoices: Array<[string, string]> = [
      ['*', 'Every method'],
      ...(api?.methods ?? []).map((method): [string, string] => [
        method.id,
        `${method.name} (${method.verb} ${method.path})`,
      ]),
    ];
    const bind =
      (field: keyof RestrictionForm, redraw = false) =>
      (event: Event) => {
        (restriction[field] as string) = (event.target as HTMLInputElement).value;
        if (field === 'api') restriction.method = '*';
        if (redraw) drawRestrictions();
      };
    const labelled = (text: string, field: string, control: HTMLElement) =>
      h(
        'label',
        { class: `field f-${field.replace(/^.*\./, '')}` },
        h('span', { text }),
        control,
        fieldError(at(field)),
      );
    const controls = [
      labelled(
        'API',
        'api',
        select(
          apiChoices,
          restriction.api.toLowerCase() === api?.id.toLowerCase() ? api.id : restriction.api,
          { name: at('api'), onchange: bind('api', true) },
        ),
      ),
      labelled(
        'Method',
        'method',
        select(
          methodChoices,
          api?.methods.find((m) => m.id.toLowerCase() === restriction.method.toLowerCase())?.id ??
            restriction.method,
          {
            name: at('method'),
            disabled: restriction.api === '*',
            onchange: bind('method'),
          },
        ),
      ),
      labelled(
        'Verb',
        'verb',
        select(
          [['', 'Every verb'], ...verbs.map((verb): [string, string] => [verb, verb])],
          restriction.verb,
          { name: at('verb'), onchange: bind('verb') },
        ),
      ),
      labelled(
        'Counts',
        'type',
        select(
          [
            ['throttle', 'Messages'],
            ['throttlemb', 'Megabytes'],
            ['throttleunits', 'Units'],
            ['concurrency', 'In flight'],
          ],
          restriction.type,
          { name: at('type'), onchange: bind('type', true) },
        ),
      ),
      labelled(
        {
          throttle: 'Messages',
          throttlemb: 'Megabytes',
          throttleunits: 'Units',
          concurrency: 'Requests at once',
        }[restriction.type],
        'config.amount',
        h('input', {
          name: at('config.amount'),
          inputmode: 'decimal',
          value: restriction.amount,
          placeholder: restriction.type === 'throttlemb' ? 'e.g. 2.5' : 'e.g. 100',
          oninput: bind('amount'),
        }),
      ),
      ...(restriction.type === 'throttleunits'
        ? [
            labelled(
              'from the header or trailer',
              'config.header',
              h('input', {
                name: at('config.header'),
                value: restriction.header,
                placeholder: 'e.g. x-tokens',
                oninput: bind('header'),
              }),
            ),
            labelled(
              'or JSON paths in the body',
              'config.body',
              h('input', {
                name: at('config.body'),
                value: restriction.body,
                placeholder: 'e.g. usage.total_tokens',
                oninput: bind('body'),
              }),
            ),
            labelled(
              'when neither says it',
              'config.fallback',
              h('input', {
                name: at('config.fallback'),
                inputmode: 'numeric',
                value: restriction.fallback,
                placeholder: '0',
                oninput: bind('fallback'),
              }),
            ),
          ]
        : []),
      // A concurrency restriction has no window: requests count while they are in flight.
      ...(hasWindow(restriction.type)
        ? [
            labelled(
              'per',
              'config.per',
              h('input', {
                name: at('config.per'),
                inputmode: 'numeric',
                value: restriction.per,
                oninput: bind('per'),
              }),
            ),
            labelled(
              'Period',
              'config.period',
              select(
                periodChoices.map((period): [string, string] => [period, `${period}s`]),
                restriction.period,
                { name: at('config.period'), onchange: bind('period') },
              ),
            ),
            labelled(
              'Window',
              'config.window',
              select(
                [
                  ['sliding', 'Sliding'],
                  ['calendar', 'Calendar'],
                ],
                restriction.window,
                { name: at('config.window'), onchange: bind('window', true) },
              ),
            ),
          ]
        : []),
      // A calendar window starts at its time zone's midnight, and a month on its billing day.
      ...(hasWindow(restriction.type) && restriction.window === 'calendar'
        ? [
            labelled(
              'Time zone',
              'config.timeZone',
              h('input', {
                name: at('config.timeZone'),
                value: restriction.timeZone,
                placeholder: 'UTC',
                oninput: bind('timeZone'),
              }),
            ),
            labelled(
              'Billing day (months)',
              'config.startDay',
              h('input', {
                name: at('config.startDay'),
                inputmode: 'numeric',
                value: restriction.startDay,
                placeholder: '1',
                oninput: bind('startDay'),
              }),
            ),
          ]
        : []),
      labelled(
        'Counted by',
        'by',
        h('input', {
          name: at('by'),
          value: restriction.by,
          placeholder: 'all together, or client, header:X-Tenant',
          oninput: bind('by'),
        }),
      ),
      h(
        'label',
        { class: 'field f-mode' },
        h('input', {
          type: 'checkbox',
          name: at('mode'),
          checked: restriction.mode === 'shadow',
          onchange: (event: Event) => {
            restriction.mode = (event.target as HTMLInputElement).checked ? 'shadow' : 'enforce';
          },
        }),
        h('span', { text: 'Shadow: count and report what it would refuse, never refuse' }),
        fieldError(at('mode')),
      ),
    ];
    if (readOnly)
      for (const control of controls)
        control.querySelectorAll('input, select').forEach((element) => element.setAttribute('disabled', ''));
    return h(
      'fieldset',
      { class: 'restriction', 'data-index': i },
      h('legend', { text: `Restriction ${i + 1}` }),
      controls,
      fieldError(`restrictions[${i}]`),
      readOnly
        ? null
        : h('button', {
            type: 'button',
            class: 'link danger',
            text: 'Remove',
            onclick: () => {
              form.restrictions.splice(i, 1);
              drawRestrictions();
            },
          }),
    );
  };

  const drawRestrictions = () => {
    replace(
      restrictionsBox,
      form.restrictions.length === 0
        ? h('p', {
            class: 'empty',
            text: `No restrictions: this quota limits nothing.${readOnly ? '' : ' Add one below.'}`,
          })
        : form.restrictions.map(restrictionRow),
      fieldError('restrictions'),
    );
  };

  const save = async (button: HTMLButtonElement) => {
    button.disabled = true;
    errors.clear();
    try {
      const path = creating ? '/quotas' : `/quotas/${quota!.id}`;
      const answer = await context.api.call<QuotaAnswer>(creating ? 'POST' : 'PUT', path, {
        body: dtoOf(form),
        ...(creating ? {} : { ifMatch: etag }),
      });
      context.notify(creating ? `Created "${answer.data.name}".` : `Saved "${answer.data.name}".`);
      location.hash = `#/quotas/${answer.data.id}`;
      if (!creating) await quotaEditorView(context, root, answer.data.id);
    } catch (error) {
      button.disabled = false;
      if (!(error instanceof ApiError)) throw error;
      if (error.status === 412) {
        // The conflict is all there is to say now: the field messages of an earlier try go.
        drawForm();
        showErrors([
          'Someone else changed this quota after you opened it, so your change was not saved. Open it again to see theirs, then make yours.',
        ]);
        banner.appendChild(
          h('button', {
            type: 'button',
            text: 'Open the current version',
            onclick: () => void quotaEditorView(context, root, quota!.id),
          }),
        );
        return;
      }
      const { byField, general } = messagesByField(error.messages, fieldNames(form));
      for (const [field, messages] of byField) errors.set(field, messages);
      drawForm();
      showErrors(
        general,
        byField.size > 0 ? ['Some fields need a change: see the messages next to them.'] : [],
      );
    }
  };

  const page = h('div', { class: 'editor' });
  const drawForm = () => {
    drawRestrictions();
    const title = creating ? 'New quota' : readOnly ? form.name : `Edit “${form.name}”`;
    replace(
      page,
      h('p', {}, h('a', { href: '#/quotas', text: '← All quotas' })),
      h('h2', { text: title }),
      quota ? h('p', { class: 'muted', text: quotaRole(quota) }) : null,
      readOnly
        ? h('p', {
            class: 'note',
            text: declared
              ? 'This quota is declared in conf/ (quotas): change it there, then reload the gateway (gateway reload).'
              : 'You can look at this quota; only an API Administrator can change it.',
          })
        : null,
      banner,
      h(
        'form',
        { class: 'quota-form', onsubmit: (event: Event) => event.preventDefault() },
        h(
          'label',
          { class: 'field' },
          h('span', { text: 'Name' }),
          h('input', {
            name: 'name',
            value: form.name,
            required: true,
            disabled: readOnly,
            oninput: (event: Event) => (form.name = (event.target as HTMLInputElement).value),
          }),
          fieldError('name'),
        ),
        h(
          'label',
          { class: 'field' },
          h('span', { text: 'Counts' }),
          select(
            [
              ['API', 'All traffic together (API quota)'],
              ['APPLICATION', 'Each application on its own (application quota)'],
            ],
            form.type,
            {
              name: 'type',
              disabled: readOnly || typeFixed,
              onchange: (event: Event) =>
                (form.type = (event.target as HTMLSelectElement).value as QuotaForm['type']),
            },
          ),
          fieldError('type'),
        ),
        h(
          'label',
          { class: 'field' },
          h('span', { text: 'Description' }),
          h(
            'textarea',
            {
              name: 'description',
              rows: 2,
              disabled: readOnly,
              oninput: (event: Event) => (form.description = (event.target as HTMLTextAreaElement).value),
            },
            form.description,
          ),
          fieldError('description'),
        ),
        h('h3', { text: 'Restrictions' }),
        restrictionsBox,
        readOnly
          ? null
          : h(
              'div',
              { class: 'actions' },
              h('button', {
                type: 'button',
                text: 'Add a restriction',
                onclick: () => {
                  form.restrictions.push(newRestriction());
                  drawRestrictions();
                },
              }),
              h('button', {
                type: 'submit',
                class: 'primary',
                text: creating ? 'Create quota' : 'Save changes',
                onclick: (event: Event) => void save(event.currentTarget as HTMLButtonElement),
              }),
            ),
      ),
    );
  };
  banner.hidden = true;
  drawForm();
  replace(root, page);
};
