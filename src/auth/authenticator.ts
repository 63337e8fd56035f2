import type { IncomingMessage, ServerResponse } from 'node:http';

/** Who made a request. `application` is the id that application quotas count against. */
export interface Principal {
  subject: string;
  application?: string;
}

export type AuthResult =
  | { ok: true; principal: Principal | null }
  | {
      ok: false;
      /** `WWW-Authenticate` value to send with the 401, if the scheme has one. */
      challenge?: string;
    };

/** One authentication scheme (`APIKeyAuthType`). It never throws for bad credentials: it answers ok: false. */
export interface Authenticator {
  readonly scheme: string;
  authenticate(req: IncomingMessage, res: ServerResponse): AuthResult | Promise<AuthResult>;
  close?(): Promise<void>;
}
