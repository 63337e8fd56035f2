import http from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AuthDocumentation } from '../auth/authenticator.js';
import type { LiveConfig } from '../config/live-config.js';
import { secretValues, valueRemover } from '../kit/secret-redaction.js';
import { AdminError, errorResponses } from './admin-errors.js';
import type { TryAnswer } from '../console/logic/try-answer.js';
import { fieldNamePattern, tryScheme } from '../console/logic/catalog.js';
import { compileCatalog, type Router } from '../catalog/router.js';
import type { AuthType, Config, OperationAuth } from '../config/schema.js';
import { normalizeTarget } from '../kit/normalize-path.js';
import type { DataPlaneAddress } from '../gateway/data-plane-address.js';

/** What the console's test requests need: the config and scheme in force, and where the data plane listens. */
export interface TryItParts {
  live: LiveConfig;
  /** The scheme in force: a plugin's applyCredentialsForTest and applyResponseForTest. */
  authDocumentation: () => AuthDocumentation;
  /** The data plane's ports; null before it listens. */
  dataPlane: () => DataPlaneAddress | null;
}

/** The request options a plugin's applyCredentialsForTest receives: those of the `request` library. */
export interface TestRequestOptions {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/** Fields a console user may not set: credentials are the gateway's to add, never the browser's. */
const credentialFields = new Set(['authorization', 'apikey', 'cookie', 'proxy-authorization', 'host']);
const longestBody = 1_048_576;
/** RFC 6750 section 2.1: the b64token of `Authorization: Bearer`. */
const bearerToken = /^[A-Za-z0-9\-._~+/]+=*$/;
/** RFC 9110 §5.5: a field value holds no CR, LF, NUL or other control (a name is a token: catalog.ts). */
const fieldValue = /^[\t\x20-\x7e\x80-\xff]*$/;

const tryBody = z.strictObject(
  {
    method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'], {
      error: 'must be GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS',
    }),
    path: z
      .string({ error: 'must be a string' })
      .max(2048, { error: 'must be at most 2048 characters' })
      .regex(/^\/(?!\/)/, { error: "must be a path of the gateway, starting with one '/'" }),
    headers: z
      .record(
        z
          .string()
          .regex(fieldNamePattern, { error: "must be a field name (letters, digits and !#$%&'*+-.^_`|~)" }),
        z
          .string({ error: 'must be a string' })
          .regex(fieldValue, { error: 'must be a field value: no line break or other control character' }),
        { error: 'must be an object of strings' },
      )
      .optional()
      .refine(
        (headers) => !Object.keys(headers ?? {}).some((name) => credentialFields.has(name.toLowerCase())),
        {
          error: 'must not set Authorization, APIKey, Cookie or Host: the gateway adds the credentials',
        },
      ),
    body: z.string({ error: 'must be a string' }).max(65_536, { error: 'must be at most 64 KiB' }).optional(),
    user: z
      .strictObject({ username: z.string().min(1), password: z.string().min(1) })
      .optional()
      .meta({ description: 'With the ldap scheme: the directory user to send the request as' }),
    token: z
      .string({ error: 'must be a string' })
      .max(16_384, { error: 'must be at most 16 KiB' })
      .regex(bearerToken, { error: 'must be a bearer token (letters, digits and -._~+/, then any =)' })
      .optional()
      .meta({
        description:
          'With the jwt scheme: the bearer token to send the request with (Authorization: Bearer); never stored, logged or shown',
      }),
  },
  { error: 'must be an object' },
);
type TryBody = z.output<typeof tryBody>;

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** Each config's catalog, routed to each operation's own `auth`: compiled once per config. */
const operationAuths = new WeakMap<Readonly<Config>, Router<OperationAuth | undefined>>();

/**
 * The scheme the test request is sent with: that of the operation its path reaches, as the data plane
 * routes it (a list's as `tryScheme` picks), or `APIKeyAuthType` where it names none.
 */
function schemeOfTry(config: Readonly<Config>, body: TryBody): AuthType {
  let router = operationAuths.get(config);
  if (!router) {
    router = compileCatalog(config.apis, (api, method) => method?.auth ?? api.auth);
    operationAuths.set(config, router);
  }
  const target = normalizeTarget(body.path, undefined);
  const own = target.ok
    ? router.match(body.method, target.segments, target.trailingSlash, target.query)?.guard
    : undefined;
  return own === undefined ? config.APIKeyAuthType : (tryScheme(own) as AuthType);
}

/** The options of the test request, with the credentials of its operation's scheme added. */
function testOptions(parts: TryItParts, body: TryBody, address: DataPlaneAddress): TestRequestOptions {
  const { config, environment } = parts.live.current;
  const scheme = schemeOfTry(config, body);
  // apikey takes keys over HTTPS only; `port: false` leaves the data plane nothing else.
  const secure = scheme === 'apikey' || address.http === undefined;
  const port = secure ? address.https : address.http;
  if (port === undefined) throw new AdminError(503, ['the data plane does not listen yet']);
  const options: TestRequestOptions = {
    method: body.method,
    url: `${secure ? 'https' : 'http'}://127.0.0.1:${port}${body.path}`,
    headers: { ...body.headers },
    ...(body.body === undefined ? {} : { body: body.body }),
  };
  const key = config[`apikey_${environment}`];
  switch (scheme) {
    case 'basic':
      if (key) options.headers.authorization = basic(key, '');
      break;
    case 'apikey':
      if (key) options.headers.apikey = key;
      break;
    case 'ldap':
      if (!body.user)
        throw new AdminError(400, ['user: is required with the ldap scheme (a directory user)']);
      options.headers.authorization = basic(body.user.username, body.user.password);
      break;
    case 'plugin':
      parts.authDocumentation().applyCredentialsForTest?.(options as unknown as Record<string, unknown>);
      return asSent(options);
    case 'jwt':
      if (!body.token)
        throw new AdminError(400, [
          'token: is required with the jwt scheme (a bearer token from the identity provider)',
        ]);
      options.headers.authorization = `Bearer ${body.token}`;
      break;
    case 'none':
      break;
  }
  return options;
}

/**
 * The options as a plugin left them, in the shape the request needs: header values as strings (a plugin
 * may set a number, as the request library allows), the URL a string; anything else is the plugin's
 * mistake, said in words.
 */
function asSent(options: TestRequestOptions): TestRequestOptions {
  const { url, headers, body } = options as { url: unknown; headers: unknown; body?: unknown };
  if (typeof url !== 'string')
    throw new AdminError(500, [
      "the auth plugin's applyCredentialsForTest left options.url without a string",
    ]);
  if (body !== undefined && typeof body !== 'string')
    throw new AdminError(500, [
      "the auth plugin's applyCredentialsForTest left options.body without a string",
    ]);
  const fields: Record<string, string> = {};
  for (const [name, value] of Object.entries(
    typeof headers === 'object' && headers !== null ? headers : {},
  )) {
    if (value === undefined || value === null) continue;
    fields[name] = Array.isArray(value) ? value.map(String).join(', ') : String(value);
  }
  return { ...options, url, headers: fields };
}

/** Sends the test request to this gateway's own data plane and reads at most 1 MiB of the answer. */
function send(
  options: TestRequestOptions,
  timeoutMs: number,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string; truncated: boolean }> {
  const url = new URL(options.url);
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = transport.request(
      url,
      {
        method: options.method,
        headers: options.headers,
        timeout: timeoutMs,
        agent: false,
        // The gateway's own HTTPS listener on the loopback: its certificate names the public host.
        rejectUnauthorized: false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        response.on('data', (chunk: Buffer) => {
          if (size >= longestBody) {
            truncated = true;
            return;
          }
          chunks.push(chunk.subarray(0, longestBody - size));
          size += chunk.length;
          if (size > longestBody) truncated = true;
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text: Buffer.concat(chunks).toString('utf8'),
            truncated,
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('timeout', () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    request.on('error', reject);
    request.end(options.body);
  });
}

/**
 * "Try it" of the console's API documentation tab (the seed's section 5.5): the gateway sends a request
 * to its own data plane, with the credentials of the scheme in force added on the server (the project
 * key for basic and apikey, a directory user for ldap, the bearer token entered for jwt, the plugin's
 * `applyCredentialsForTest` for a plugin), passes the answer through the plugin's `applyResponseForTest` (or `applyRequestsForTest`),
 * and answers status, headers and body with every credential it added taken out. API Administrators
 * only; it reaches nothing but the gateway's own data plane on the loopback.
 */
export function registerTryIt(app: FastifyInstance, parts: TryItParts): void {
  app.post(
    '/console/try',
    {
      schema: {
        summary:
          "Send a request through this gateway's data plane with the scheme's credentials (API Administrators)",
        operationId: 'tryRequest',
        tags: ['console'],
        body: tryBody,
        response: {
          200: {
            description: 'The data plane answered (whatever its status)',
            type: 'object',
            properties: {
              status: { type: 'integer' },
              headers: { type: 'object', additionalProperties: true },
              body: {},
              truncated: { type: 'boolean' },
              ms: { type: 'number' },
            },
          },
          ...errorResponses,
        },
      },
    },
    async (request: FastifyRequest<{ Body: TryBody }>): Promise<TryAnswer> => {
      if (request.adminUser?.role !== 'admin')
        throw new AdminError(403, ['only an API Administrator may send test requests']);
      const address = parts.dataPlane();
      if (!address) throw new AdminError(503, ['the data plane does not listen yet']);
      const options = testOptions(parts, request.body, address);
      // A plugin may have pointed the request elsewhere: only this gateway's data plane is reached.
      const target = new URL(options.url);
      const port = target.protocol === 'https:' ? address.https : address.http;
      if (target.hostname !== '127.0.0.1' || port === undefined || Number(target.port) !== port)
        throw new AdminError(400, ["the request must go to this gateway's data plane"]);
      const hide = valueRemover(spellings(addedSecrets(parts, request.body, options)));
      const started = performance.now();
      const answer = await send(options, parts.live.config.proxyTimeout + 5_000).catch((error: Error) => {
        throw new AdminError(503, [`the data plane did not answer: ${hide(error.message)}`]);
      });
      const ms = Math.round((performance.now() - started) * 100) / 100;
      let body: unknown = parseBody(answer.text, answer.headers['content-type']);
      const adjust = parts.authDocumentation().applyResponseForTest;
      if (adjust) {
        const adjusted = adjust({ statusCode: answer.status, headers: answer.headers }, body);
        if (adjusted !== undefined) body = adjusted;
      }
      return {
        status: answer.status,
        headers: Object.fromEntries(
          Object.entries(answer.headers).flatMap(([name, value]) =>
            value === undefined ? [] : [[hide(name), Array.isArray(value) ? value.map(hide) : hide(value)]],
          ),
        ),
        body: JSON.parse(hide(JSON.stringify(body ?? null))) as unknown,
        truncated: answer.truncated,
        ms,
      };
    },
  );
}

/**
 * Every value the answer must not show: the config's secrets (keys, passwords, a plugin's declared
 * settings), and whatever the scheme added to the request — header values and their parts, the user and
 * password of Basic credentials (an echoing upstream may show them decoded), query parameters a plugin
 * put in the URL.
 */
function addedSecrets(parts: TryItParts, body: TryBody, options: TestRequestOptions): string[] {
  const { config, extras } = parts.live.current;
  const headers = Object.entries(options.headers)
    .filter(([name, value]) => body.headers?.[name] !== value)
    .map(([, value]) => value);
  const sent = new URL(body.path, 'http://gateway').searchParams;
  const query = [...new URL(options.url).searchParams]
    .filter(([name, value]) => !sent.getAll(name).includes(value))
    .map(([, value]) => value);
  return [
    ...secretValues({ ...extras, ...config }),
    ...(body.user ? [body.user.password] : []),
    ...(body.token ? [body.token] : []),
    ...headers,
    ...headers.flatMap((value) => value.split(/\s+/).slice(1)),
    ...decoded(headers),
    ...query,
  ];
}

/** Each secret as an answer may spell it: as is, inside a JSON string, percent-encoded, in base64. */
function spellings(secrets: readonly string[]): string[] {
  return [...new Set(secrets)].flatMap((secret) => [
    secret,
    JSON.stringify(secret).slice(1, -1),
    encodeURIComponent(secret),
    Buffer.from(secret).toString('base64'),
    Buffer.from(secret).toString('base64url'),
  ]);
}

/** The user and password of Basic credentials the gateway added, which an echoing upstream may show decoded. */
function decoded(values: readonly string[]): string[] {
  return values.flatMap((value) => {
    const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(value);
    if (!match) return [];
    const text = Buffer.from(match[1]!, 'base64').toString('utf8');
    return [text, ...text.split(':')].filter((part) => part.length >= 4);
  });
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (contentType?.includes('json')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      return text;
    }
  }
  return text;
}
