/** The console's calls to the portal API: its login session, CSRF token and error messages. */
export const portal = '/api/portal/v1.3';

/** An answer other than 2xx, with the admin API's messages in words. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly messages: string[],
  ) {
    super(messages.join('; ') || `the gateway answered ${status}`);
  }
}

export interface CurrentUser {
  loginName: string;
  role: 'admin' | 'user';
}

interface CallOptions {
  body?: unknown;
  ifMatch?: string;
}

export class Api {
  /** Sent back with every change, as the login session asks. */
  private csrfToken = '';
  /** Called when the session has ended (401): the console shows its login again. */
  onSignedOut: () => void = () => undefined;

  /** The user of the browser's session, or null when it has none (or it ended). */
  async resume(): Promise<CurrentUser | null> {
    const response = await fetch(`${portal}/currentuser`, { credentials: 'same-origin' });
    if (!response.ok) {
      // A body left unread keeps its request open in the browser's eyes: a headless tool waiting for
      // the network to go idle (a screenshot, a synthetic monitor) would wait on the login page forever.
      await response.body?.cancel();
      return null;
    }
    this.csrfToken = response.headers.get('csrf-token') ?? '';
    return (await response.json()) as CurrentUser;
  }

  /** Logs in (the session cookie is set by the answer); the redirect leads to the current user. */
  async login(username: string, password: string): Promise<CurrentUser> {
    const response = await fetch(`${portal}/login`, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username, password }),
    });
    if (!response.ok) throw await errorOf(response);
    this.csrfToken = response.headers.get('csrf-token') ?? '';
    return (await response.json()) as CurrentUser;
  }

  async logout(): Promise<void> {
    await this.call('DELETE', '/login').catch(() => undefined);
    this.csrfToken = '';
  }

  async get<T>(path: string): Promise<T> {
    return (await this.call<T>('GET', path)).data;
  }

  /** One call; its entity tag comes back for the If-Match of the next change, with the answer's status. */
  async call<T>(
    method: string,
    path: string,
    options: CallOptions = {},
  ): Promise<{ data: T; etag: string; status: number }> {
    const headers: Record<string, string> = {};
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (method !== 'GET') headers['csrf-token'] = this.csrfToken;
    if (options.ifMatch) headers['if-match'] = options.ifMatch;
    let response: Response;
    try {
      response = await fetch(`${portal}${path}`, {
        method,
        credentials: 'same-origin',
        headers,
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      });
    } catch {
      throw new ApiError(0, ['the gateway cannot be reached: is it running?']);
    }
    if (response.status === 401) this.onSignedOut();
    if (!response.ok) throw await errorOf(response);
    const text = await response.text();
    return {
      data: (text ? JSON.parse(text) : null) as T,
      etag: response.headers.get('etag') ?? '',
      status: response.status,
    };
  }
}

/** What went wrong, in words: the admin API's messages, or the error as the browser states it. */
export function messageOf(error: unknown): string {
  return error instanceof ApiError ? error.message : String(error);
}

async function errorOf(response: Response): Promise<ApiError> {
  try {
    const body = (await response.json()) as { errors?: Array<{ message?: string }> };
    const messages = (body.errors ?? []).map((error) => error.message ?? '').filter(Boolean);
    return new ApiError(response.status, messages.length > 0 ? messages : [response.statusText]);
  } catch {
    return new ApiError(response.status, [`the gateway answered ${response.status} ${response.statusText}`]);
  }
}
