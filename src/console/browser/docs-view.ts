import {
  fillPath,
  missingParameters,
  parseHeaderLines,
  type Catalog,
  type CatalogApi,
  type CatalogMethod,
} from '../logic/catalog.js';
import type { TryAnswer } from '../logic/try-answer.js';
import { targetsSummary, type ApiUpstream } from '../logic/upstreams.js';
import { messageOf } from './api.js';
import type { Context, View } from './context.js';
import { h, replace } from './dom.js';

/** Fields the quota machinery sets: highlighted in the answer. */
const rateLimitField = /^(ratelimit|ratelimit-policy|retry-after|x-ratelimit-.*)$/i;
const withBody = new Set(['POST', 'PUT', 'PATCH']);

/** How the gateway will authenticate the test request, in words. */
function credentialsText(authType: string): string {
  switch (authType) {
    case 'basic':
    case 'apikey':
      return "The gateway adds the project's key for you; it never comes back to this page.";
    case 'plugin':
      return 'The gateway adds the credentials the auth plugin gives it (applyCredentialsForTest); they never come back to this page.';
    case 'ldap':
      return 'Enter a directory user: the gateway sends the request as that user.';
    case 'jwt':
      return 'Paste a bearer token from the identity provider: the gateway sends it as Authorization: Bearer. It is not stored or logged, and never comes back to this page.';
    default:
      return 'The gateway needs no credentials (APIKeyAuthType none).';
  }
}

function answerView(answer: TryAnswer): HTMLElement {
  const body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body, null, 2);
  const statusClass = answer.status < 300 ? 'ok' : answer.status < 500 ? 'warn' : 'bad';
  return h(
    'div',
    { class: 'try-answer', 'data-status': answer.status },
    h(
      'p',
      {},
      h('span', { class: `status ${statusClass}`, text: String(answer.status) }),
      ` in ${answer.ms} ms`,
    ),
    h(
      'table',
      { class: 'headers' },
      Object.entries(answer.headers).map(([name, value]) =>
        h(
          'tr',
          { class: rateLimitField.test(name) ? 'ratelimit' : '' },
          h('th', { text: name }),
          h('td', { text: Array.isArray(value) ? value.join(', ') : value }),
        ),
      ),
    ),
    h('pre', { class: 'body', text: body + (answer.truncated ? '\n… (cut at 1 MiB)' : '') }),
  );
}

function tryForm(context: Context, method: CatalogMethod, authType: string): HTMLElement {
  const params = method.parameters.map((name) =>
    h(
      'label',
      { class: 'field' },
      h('span', { text: name }),
      h('input', { name: `param-${name}`, required: true }),
    ),
  );
  const query = h('input', { name: 'query', placeholder: 'a=1&b=2' }) as HTMLInputElement;
  const headers = h('textarea', {
    name: 'headers',
    rows: 2,
    placeholder: 'Accept: application/json',
  }) as HTMLTextAreaElement;
  const body = withBody.has(method.verb)
    ? (h('textarea', { name: 'body', rows: 4, placeholder: '{"name": "Rex"}' }) as HTMLTextAreaElement)
    : null;
  const username = h('input', { name: 'username', autocomplete: 'off' }) as HTMLInputElement;
  const password = h('input', {
    name: 'password',
    type: 'password',
    autocomplete: 'off',
  }) as HTMLInputElement;
  // A password field: the token is not shown on the screen, and the browser offers to keep nothing.
  const token = h('input', {
    name: 'token',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
  }) as HTMLInputElement;
  const result = h('div', { class: 'try-result', 'aria-live': 'polite' });

  const send = async (button: HTMLButtonElement) => {
    const values = Object.fromEntries(
      method.parameters.map((name, i) => [
        name,
        (params[i]!.querySelector('input') as HTMLInputElement).value,
      ]),
    );
    // An empty parameter makes another path (`/pets/` for `/pets/{petId}`), which another operation answers.
    const missing = missingParameters(method.path, values);
    if (missing.length > 0) {
      const them = missing.length === 1 ? 'it' : 'them';
      replace(
        result,
        h('p', {
          class: 'error',
          text: `Fill in ${missing.join(', ')}: the path of ${method.name} needs ${them}.`,
        }),
      );
      return;
    }
    const parsed = parseHeaderLines(headers.value);
    if (parsed.mistakes.length > 0) {
      replace(result, h('p', { class: 'error', text: parsed.mistakes.join('; ') }));
      return;
    }
    button.disabled = true;
    replace(result, h('p', { class: 'muted', text: 'Sending…' }));
    try {
      const request = {
        method: method.verb,
        path: fillPath(method.path, values, query.value),
        headers: { ...(body && body.value ? { 'content-type': 'application/json' } : {}), ...parsed.headers },
        ...(body && body.value ? { body: body.value } : {}),
        ...(authType === 'ldap' ? { user: { username: username.value, password: password.value } } : {}),
        ...(authType === 'jwt' ? { token: token.value.trim() } : {}),
      };
      const answer = await context.api.call<TryAnswer>('POST', '/console/try', { body: request });
      replace(result, answerView(answer.data));
    } catch (error) {
      replace(result, h('p', { class: 'error', text: messageOf(error) }));
    } finally {
      button.disabled = false;
    }
  };

  return h(
    'form',
    { class: 'try-form', onsubmit: (event: Event) => event.preventDefault() },
    h('p', { class: 'muted', text: credentialsText(authType) }),
    params,
    h('label', { class: 'field' }, h('span', { text: 'Query string' }), query),
    h('label', { class: 'field' }, h('span', { text: 'Headers, one per line' }), headers),
    body ? h('label', { class: 'field' }, h('span', { text: 'Body' }), body) : null,
    authType === 'ldap'
      ? [
          h('label', { class: 'field' }, h('span', { text: 'Directory user' }), username),
          h('label', { class: 'field' }, h('span', { text: 'Password' }), password),
        ]
      : null,
    authType === 'jwt' ? h('label', { class: 'field' }, h('span', { text: 'Bearer token' }), token) : null,
    h('button', {
      type: 'submit',
      class: 'primary',
      text: 'Send',
      onclick: (event: Event) => void send(event.currentTarget as HTMLButtonElement),
    }),
    result,
  );
}

/**
 * How to call a method that "try it" cannot send (it sends HTTP/1.1 requests): a gRPC method, which a
 * gRPC API takes over HTTP/2 only (505 otherwise), or a WebSocket endpoint, which a plain GET cannot open.
 */
function callNote(method: CatalogMethod, server: string): HTMLElement | null {
  const secure = server.startsWith('https:');
  const address = server.replace(/^https?:\/\//, '');
  if (method.protocol === 'grpc')
    return h(
      'p',
      { class: 'note' },
      'A gRPC method: "try it" sends HTTP/1.1, which a gRPC API refuses (505). Call it with a gRPC client over HTTP/2, with the credentials of the scheme, for example ',
      h('code', {
        text: `grpcurl ${secure ? '' : '-plaintext '}-proto <its .proto> -d '{…}' ${address} ${method.path.replace(/^\//, '')}`,
      }),
    );
  if (method.protocol === 'websocket')
    return h(
      'p',
      { class: 'note' },
      'A WebSocket endpoint: a plain GET cannot open it. Connect a WebSocket client, with the credentials of the scheme, for example ',
      h('code', { text: `wscat -c ${secure ? 'wss' : 'ws'}://${address}${method.path}` }),
    );
  return null;
}

function operation(context: Context, api: CatalogApi, method: CatalogMethod, catalog: Catalog): HTMLElement {
  const details = h(
    'details',
    { class: 'operation', 'data-operation': method.name },
    h(
      'summary',
      {},
      h('span', { class: `verb verb-${method.verb.toLowerCase()}`, text: method.verb }),
      h('code', { text: method.path }),
      h('span', { class: 'muted', text: method.name }),
    ),
    method.description ? h('p', { text: method.description }) : null,
  ) as HTMLDetailsElement;
  let drawn = false;
  details.addEventListener('toggle', () => {
    if (!details.open || drawn) return;
    drawn = true;
    details.appendChild(
      callNote(method, catalog.server) ??
        (context.isAdmin
          ? tryForm(context, method, method.authType)
          : h('p', { class: 'note', text: 'Only an API Administrator can send test requests.' })),
    );
  });
  details.dataset.api = api.name;
  return details;
}

/**
 * An API's upstream targets as the gateway knows them now: the balance policy and how many are healthy,
 * then each target's URL (an address, with the name it was resolved from), weight, state and exchanges in
 * flight.
 */
function targetsView(upstream: ApiUpstream): HTMLElement {
  return h(
    'div',
    { class: 'targets', 'data-targets': upstream.api },
    h('p', { class: 'muted', text: targetsSummary(upstream) }),
    h(
      'table',
      {},
      h(
        'tr',
        {},
        ['Target', 'Weight', 'State', 'In flight'].map((title) => h('th', { text: title })),
      ),
      upstream.targets.map((target) =>
        h(
          'tr',
          { 'data-target': target.url },
          h(
            'td',
            {},
            h('code', { text: target.url }),
            // An address a target's host name resolved to (upstream.dnsRefresh): the name it came from.
            target.host === null
              ? null
              : h('span', { class: 'muted', text: ` resolved from ${target.host}` }),
          ),
          h('td', { text: String(target.weight) }),
          h(
            'td',
            {},
            h('span', {
              class: `status ${target.healthy && !target.ejected ? 'ok' : 'bad'}`,
              text: !target.healthy ? 'out' : target.ejected ? 'ejected' : 'healthy',
            }),
          ),
          h('td', { text: String(target.inFlight) }),
        ),
      ),
    ),
  );
}

/**
 * The catalog's OpenAPI document as operations per API, each with a "try it" form, under the API's
 * upstream targets and their state (left out when they cannot be read).
 */
export const docsView: View = async (context, root) => {
  const [catalog, upstreams] = await Promise.all([
    context.catalog(),
    context.api.get<ApiUpstream[]>('/upstreams').catch(() => []),
  ]);
  const upstreamOf = new Map(upstreams.map((upstream) => [upstream.api, upstream]));
  replace(
    root,
    h(
      'div',
      { class: 'toolbar' },
      h('h2', { text: 'API documentation' }),
      h('a', {
        class: 'button',
        href: '/api/portal/v1.3/apis/openapi.json',
        target: '_blank',
        text: 'OpenAPI document',
      }),
    ),
    h('p', {
      class: 'lead',
      text: 'The APIs behind this gateway. "Try it" sends a request through the gateway itself: it is authenticated and counted against the quotas like any other.',
    }),
    catalog.apis.length === 0
      ? h('p', {
          class: 'empty',
          text: 'The catalog has no APIs: add them under "apis" in conf/ and reload.',
        })
      : catalog.apis.map((api) =>
          h(
            'section',
            { class: 'card api' },
            h('h3', { text: api.name }),
            upstreamOf.has(api.id) ? targetsView(upstreamOf.get(api.id)!) : null,
            api.methods.map((method) => operation(context, api, method, catalog)),
          ),
        ),
  );
};
