import type { AuthDocumentation } from '../auth/authenticator.js';
import { builtInSecurity } from '../auth/swagger-security.js';
import type { AuthType, Config, OperationAuth } from '../config/schema.js';
import { dataPlaneErrors } from '../gateway/answers/errors.js';
import { uniqueLabels } from '../kit/unique-labels.js';

type SecurityDefinition = Record<string, unknown> & { type?: unknown; description?: unknown };

/** Swagger 2.0 security definitions (what plugins return) in their OpenAPI 3 form. */
function toSecuritySchemes(definitions: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(definitions).map(([name, value]) => {
      const definition = value as SecurityDefinition;
      return [
        name,
        definition.type === 'basic' ? { ...definition, type: 'http', scheme: 'basic' } : definition,
      ];
    }),
  );
}

const joinPath = (basePath: string, path: string) =>
  `${basePath === '/' ? '' : basePath}${path === '/' ? '' : path}` || '/';

const headerOf = (description: string, type = 'string') => ({ description, schema: { type } });

/** The rate-limit fields of an answer that passed or met a quota (draft-ietf-httpapi-ratelimit-headers). */
const rateLimitHeaders = {
  RateLimit: headerOf(
    'One item per restriction that applies (at most 10, the closest to its limit first), named <quota id>/<index>: units remaining (r), seconds until the oldest counted units leave the window (t, at most w)',
  ),
  'RateLimit-Policy': headerOf(
    'One item per restriction, in the same order: its limit (q), window in seconds (w), and qu="content-bytes" for a byte limit',
  ),
};

/** The seed's error body: `{"id":"com.vendor.api.<code>","message":"…","success":false}`. */
const errorSchema = {
  type: 'object',
  required: ['id', 'message', 'success'],
  properties: {
    id: {
      type: 'string',
      enum: Object.keys(dataPlaneErrors).map((code) => `com.vendor.api.${code}`),
    },
    message: { type: 'string' },
    success: { type: 'boolean', enum: [false] },
  },
};

const errorAnswer = (description: string, headers: Record<string, unknown> = {}) => ({
  description,
  headers: { 'X-Request-Id': headerOf('The id of the request, as the access log has it'), ...headers },
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/** The answers the gateway itself may give to any operation, besides the upstream's. */
function gatewayAnswers(secured: boolean): Record<string, unknown> {
  return {
    ...(secured
      ? {
          '401': errorAnswer('The credentials are missing or wrong', {
            'WWW-Authenticate': headerOf('The scheme to authenticate with (basic and ldap)'),
          }),
        }
      : {}),
    '413': errorAnswer('The declared body is larger than a byte quota allows in a whole window'),
    '429': errorAnswer('A quota is spent: try again after Retry-After seconds', {
      'Retry-After': headerOf('Seconds until the request would be admitted', 'integer'),
      ...rateLimitHeaders,
    }),
    '502': errorAnswer('The upstream could not be reached, or answered with something that is not HTTP'),
    '503': errorAnswer('The directory, the auth plugin or the quota store did not answer in time', {
      'Retry-After': headerOf('Seconds to wait, when the gateway knows', 'integer'),
    }),
    '504': errorAnswer('The upstream did not answer within proxyTimeout'),
  };
}

type SwaggerSecurity = ReturnType<AuthDocumentation['swaggerSecurity']>;

/**
 * The security of an operation whose `auth` names its schemes: each an alternative (OpenAPI 3, Security
 * Requirement Object), none for `none`. `APIKeyAuthType`'s scheme is documented as the authenticator in
 * force says (a plugin's getSwaggerSecurity); a plugin named only by operations, by a generic entry.
 */
function operationSecurity(
  auth: OperationAuth,
  config: Readonly<Config>,
  docs: AuthDocumentation,
): SwaggerSecurity {
  const schemes: readonly AuthType[] = typeof auth === 'string' ? [auth] : auth;
  const each = schemes.map((scheme) =>
    scheme === config.APIKeyAuthType
      ? docs.swaggerSecurity()
      : scheme === 'plugin'
        ? {
            securityDefinitions: {
              plugin: {
                type: 'apiKey',
                name: 'Authorization',
                in: 'header',
                description: 'What the auth plugin reads',
              },
            },
            security: [{ plugin: [] }],
          }
        : builtInSecurity[scheme](),
  );
  return {
    securityDefinitions: Object.assign({}, ...each.map((one) => one.securityDefinitions)) as Record<
      string,
      unknown
    >,
    security: each.flatMap((one) => one.security),
  };
}

/** How to authenticate, in words, for the document's description. */
function authenticationText(config: Readonly<Config>): string {
  switch (config.APIKeyAuthType) {
    case 'none':
      return 'No credentials are needed.';
    case 'basic':
      return "Send the application's API key as the username of HTTP basic credentials, with an empty password: `curl -u '<key>:' …`.";
    case 'apikey':
      return "Send the application's API key in the APIKey header, over HTTPS only.";
    case 'ldap':
      return 'Send your directory username and password as HTTP basic credentials.';
    case 'jwt':
      return 'Send an access token from the identity provider: `Authorization: Bearer <token>`.';
    case 'plugin':
      return 'Send the credentials the auth plugin asks for (see the security schemes).';
  }
}

/**
 * The OpenAPI 3 description of the proxied APIs: one operation per catalog method (its path parameters,
 * its operationId: the method's name, or its id where names repeat), on the data plane's address,
 * secured the way the scheme (or the plugin's getSwaggerSecurity) says, with the answers the gateway
 * itself may give (401, 413, 429 with its Retry-After and RateLimit fields, 502, 503, 504). A gRPC
 * method, or a method declared a WebSocket endpoint, says so in `x-quotagate-protocol`.
 */
export function catalogOpenApi(config: Readonly<Config>, auth: AuthDocumentation): Record<string, unknown> {
  const { securityDefinitions, security } = auth.swaggerSecurity();
  const definitions: Record<string, unknown> = { ...securityDefinitions };
  const secured = security.length > 0;
  const operationIds = uniqueLabels(config.apis.flatMap((api) => api.methods));
  const paths: Record<string, Record<string, unknown>> = {};
  for (const api of config.apis) {
    for (const method of api.methods) {
      const path = joinPath(api.basePath, method.path);
      const parameters = [...method.path.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map(([, name]) => ({
        name,
        in: 'path',
        required: true,
        schema: { type: 'string' },
      }));
      const own = method.auth ?? api.auth;
      const ownSecurity = own === undefined ? null : operationSecurity(own, config, auth);
      if (ownSecurity) Object.assign(definitions, ownSecurity.securityDefinitions);
      paths[path] ??= {};
      paths[path][method.verb.toLowerCase()] = {
        operationId: operationIds.get(method.id),
        summary: method.name,
        tags: [api.name],
        ...(method.description ? { description: method.description } : {}),
        ...(parameters.length > 0 ? { parameters } : {}),
        'x-quotagate-api-id': api.id,
        'x-quotagate-method-id': method.id,
        // What a client needs to call it, when plain HTTP is not enough: the console's "try it" offers
        // these a note on how to call them instead of a form.
        ...(api.protocol === 'grpc'
          ? { 'x-quotagate-protocol': 'grpc' }
          : method.websocket === true
            ? { 'x-quotagate-protocol': 'websocket' }
            : {}),
        // An operation with a scheme of its own says so, and overrides the document's `security`.
        ...(ownSecurity ? { security: ownSecurity.security, 'x-quotagate-auth': own } : {}),
        responses: {
          default: { description: 'The upstream response', headers: rateLimitHeaders },
          ...gatewayAnswers(ownSecurity ? ownSecurity.security.length > 0 : secured),
        },
      };
    }
  }
  const scheme = config.tls ? 'https' : 'http';
  const port = config.tls ? config.tls.port : config.port;
  return {
    openapi: '3.0.3',
    info: {
      title: 'APIs behind quotagate',
      version: '1.0.0',
      description: `${authenticationText(config)} Quotas answer 429 with Retry-After once spent; every answer that met a quota carries the RateLimit and RateLimit-Policy fields.`,
    },
    servers: [
      {
        url: `${scheme}://{host}:${port}`,
        description: 'The gateway',
        variables: { host: { default: config.tls?.host ?? config.host ?? '127.0.0.1' } },
      },
    ],
    // The console's "try it" asks for a directory user with ldap, and says how credentials are added.
    'x-quotagate-auth': config.APIKeyAuthType,
    paths,
    components: { securitySchemes: toSecuritySchemes(definitions), schemas: { Error: errorSchema } },
    security,
  };
}
