/**
 * Every status the admin API answers with an error, and its default message. Bodies are
 * `{"errors":[{"code":<status>,"message":"..."}]}`; the README lists each status.
 */
export const adminErrorStatuses = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  421: 'Misdirected Request',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
} as const;

export type AdminErrorStatus = keyof typeof adminErrorStatuses;

/** The JSON Schema of every error body, for the OpenAPI document. */
export const errorsJsonSchema = {
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

export interface ErrorsBody {
  errors: Array<{ code: number; message: string }>;
}

export function errorsBody(status: AdminErrorStatus, messages: readonly string[] = []): ErrorsBody {
  const list = messages.length > 0 ? messages : [adminErrorStatuses[status]];
  return { errors: list.map((message) => ({ code: status, message })) };
}

/** An admin API error: thrown by handlers, turned into a response by the error handler. */
export class AdminError extends Error {
  constructor(
    readonly status: AdminErrorStatus,
    readonly messages: readonly string[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(messages.join('; ') || adminErrorStatuses[status]);
  }
}

/**
 * The error answers of an admin route, as its OpenAPI responses: each status with the Errors body; a
 * 401 says in WWW-Authenticate how to authenticate.
 */
export const errorResponses = Object.fromEntries(
  Object.entries(adminErrorStatuses).map(([status, description]) => [
    status,
    {
      description,
      ...(status === '401'
        ? {
            headers: { 'WWW-Authenticate': { type: 'string', description: 'Basic realm="quotagate admin"' } },
          }
        : {}),
      $ref: 'Errors#',
    },
  ]),
);
