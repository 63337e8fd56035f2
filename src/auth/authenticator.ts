import type { Principal } from '../applications/application-directory.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthTracing } from './auth-tracing.js';

/** Who made a request. `application` is the id that application quotas count against. */
export type { Principal };

export type AuthResult =
  | {
      ok: true;
      /** null: nobody in particular (scheme `none`, or a URL the plugin does not validate). */
      principal: Principal | null;
      /** True when the plugin declined to validate this URL, so it passes unauthenticated. */
      unvalidated?: boolean;
    }
  | {
      ok: false;
      reject: 'unauthorized';
      /** The WWW-Authenticate challenge, or one per scheme of a list (RFC 9110 section 11.6.1). */
      challenge?: string | readonly string[];
      /** Why, when the client can do something about it; the answer and the access line say it. */
      reason?: AuthRefusalReason;
      /**
       * Why, for the authentication span only (never the answer or the log line: it would tell a
       * guesser an unknown user from a wrong password). `reason` says it when set.
       */
      cause?: AuthRefusalCause;
    }
  | {
      ok: false;
      /** service_unavailable: the directory or the plugin did not answer; internal_error: it failed. */
      reject: 'service_unavailable' | 'internal_error';
    };

/**
 * `https_required`: the scheme takes credentials over HTTPS only, and the request came over plain HTTP.
 * `several_credentials`: a list of schemes met credentials of more than one of them at once.
 */
export type AuthRefusalReason = 'https_required' | 'several_credentials';

/**
 * Why credentials were refused, as the authentication span says it: none of the scheme's
 * (`no_credentials`), a key no application has (`unknown_key`), a name the directory does not know or
 * finds twice (`unknown_user`), a password its entry does not bind with (`bad_password`), an entry that
 * can be no caller (`no_identity`), a token that is not a signed JWT (`malformed_token`), signed with an
 * algorithm not taken (`algorithm_refused`), whose signature is wrong (`bad_signature`), whose key no
 * known one is (`unknown_signing_key`), expired (`expired_token`), with a claim not accepted or missing
 * (`claim_refused`), or the plugin's no (`plugin_refused`).
 */
export type AuthRefusalCause =
  | 'no_credentials'
  | 'unknown_key'
  | 'unknown_user'
  | 'bad_password'
  | 'no_identity'
  | 'malformed_token'
  | 'algorithm_refused'
  | 'bad_signature'
  | 'unknown_signing_key'
  | 'expired_token'
  | 'claim_refused'
  | 'plugin_refused';

/** Hooks a custom plugin may offer the admin port: Swagger security, and the console's test requests. */
export interface AuthDocumentation {
  /** Swagger 2.0 `{ securityDefinitions, security }` of the scheme. */
  swaggerSecurity(): { securityDefinitions: Record<string, unknown>; security: unknown[] };
  applyCredentialsForTest?(options: Record<string, unknown>): void;
  applyResponseForTest?(response: unknown, body: unknown): unknown;
}

/**
 * One authentication scheme (`APIKeyAuthType`). Bad credentials are an answer (ok: false), never a throw.
 */
/**
 * What a name given to the Quota API (`/applications/{id}/quota`) stands for, by the scheme's own
 * directory: the identity principals carry, or why no caller can have it, or no answer.
 */
export type Identification = { identity: string } | { unknown: string } | 'unavailable';

export interface Authenticator {
  readonly scheme: string;
  /**
   * @param path the request's path as routed (normalized, with its query): a scheme that matches URLs
   *   reads this, never `req.url`, which keeps what the client sent
   * @param tracing the exchange's trace and its authentication span, when that span records: the
   *   spans of the scheme's own exchanges (an LDAP bind, a JWKS fetch) hang under it; absent, the
   *   scheme traces nothing and allocates nothing for it
   */
  authenticate(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    tracing?: AuthTracing,
  ): AuthResult | Promise<AuthResult>;
  readonly documentation: AuthDocumentation;
  /**
   * The identity a name stands for, for schemes whose callers live in a directory the gateway can ask
   * (ldap): a quota given to a name no caller is ever identified by would apply to no one.
   */
  identify?(name: string): Promise<Identification>;
  close?(): Promise<void>;
}

/** The answers of admitted principals, made once each: a request allocates none. */
const admissions = new WeakMap<Principal, AuthResult>();

/** `{ ok: true, principal }`, the same object for every request of a principal. */
export function admitted(principal: Principal): AuthResult {
  let result = admissions.get(principal);
  if (!result) {
    result = Object.freeze({ ok: true, principal });
    admissions.set(principal, result);
  }
  return result;
}
