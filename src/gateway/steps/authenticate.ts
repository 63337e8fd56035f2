import type { Span } from '@opentelemetry/api';
import { markFailed } from '../../auth/auth-tracing.js';
import type { AuthResult } from '../../auth/authenticator.js';
import type { ExchangeTrace } from '../../observe/tracing.js';
import { authRefusalDetails } from '../answers/errors.js';
import { refuse } from '../answers/refusal.js';
import type { ExchangeRecord } from '../record.js';
import { isPromise, type Next, type StepContext } from './context.js';

/**
 * Step 3: the authenticator of the operation routed (its `auth`, else APIKeyAuthType's), on the path
 * routed; a promise only when it has to wait.
 */
export function authenticate(_context: StepContext, record: ExchangeRecord): Next {
  const { trace } = record;
  if (trace !== null && trace.recording) return authenticateInSpan(record, trace);
  const auth = record.authenticator().authenticate(record.req, record.res, record.routedPath);
  if (isPromise(auth)) return auth.then((result) => authenticated(record, result));
  return authenticated(record, auth);
}

/**
 * The same, in the exchange's authentication span (`quotagate.authenticate`), which the scheme's own
 * exchanges (an LDAP bind, a JWKS fetch) hang under; it ends on every way out: an answer at once, a
 * promise resolved or rejected (a 500), or one resolved after the client left.
 */
function authenticateInSpan(record: ExchangeRecord, trace: ExchangeTrace): Next {
  const authenticator = record.authenticator();
  const span = trace.child('quotagate.authenticate', 'internal', {
    'quotagate.auth.scheme': authenticator.scheme,
  });
  let auth: AuthResult | Promise<AuthResult>;
  try {
    auth = authenticator.authenticate(record.req, record.res, record.routedPath, { trace, span });
  } catch (error) {
    endFailed(span, error);
    throw error;
  }
  if (!isPromise(auth)) {
    endAuthenticationSpan(span, record, auth);
    return authenticated(record, auth);
  }
  return auth.then(
    (result) => {
      endAuthenticationSpan(span, record, result);
      return authenticated(record, result);
    },
    (error: unknown) => {
      endFailed(span, error);
      throw error;
    },
  );
}

/**
 * Ends the authentication span with the scheme's answer: `admitted`, `refused` (and why, never with
 * the credentials), `unavailable` (503) or `failed` (500), these two as errors.
 */
function endAuthenticationSpan(span: Span, record: ExchangeRecord, auth: AuthResult): void {
  // The exchange had ended (its client left, its access line written) before the scheme answered.
  if (record.accounted) span.setAttribute('quotagate.auth.late', true);
  if (auth.ok) {
    span.setAttribute('quotagate.auth.outcome', 'admitted');
    if (auth.unvalidated === true) span.setAttribute('quotagate.auth.unvalidated', true);
  } else if (auth.reject === 'unauthorized') {
    span.setAttribute('quotagate.auth.outcome', 'refused');
    const why = auth.reason ?? auth.cause;
    if (why !== undefined) span.setAttribute('quotagate.auth.refusal', why);
  } else {
    span.setAttribute('quotagate.auth.outcome', auth.reject === 'internal_error' ? 'failed' : 'unavailable');
    markFailed(span, auth.reject);
  }
  span.end();
}

/** Ends the authentication span of a scheme that threw: the pipeline answers 500. */
function endFailed(span: Span, error: unknown): void {
  span.setAttribute('quotagate.auth.outcome', 'failed');
  markFailed(span, error instanceof Error ? error.name : 'Error');
  span.end();
}

/** The WWW-Authenticate fields of a refusal: one per challenge (a list of schemes gives several). */
function challengeFields(challenge: string | readonly string[] | undefined): string[] {
  if (challenge === undefined) return [];
  if (typeof challenge === 'string') return ['www-authenticate', challenge];
  return challenge.flatMap((each) => ['www-authenticate', each]);
}

/** Takes the authenticator's answer: the principal, or the refusal it says. */
export function authenticated(record: ExchangeRecord, auth: AuthResult): boolean {
  // The client left while the authenticator decided (or a plugin answered it itself).
  if (record.answered()) return false;
  if (!auth.ok) {
    const challenge = auth.reject === 'unauthorized' ? auth.challenge : undefined;
    if (auth.reject === 'unauthorized' && auth.reason) record.reason = auth.reason;
    const detail = record.reason ? authRefusalDetails[record.reason] : undefined;
    refuse(record, auth.reject, challengeFields(challenge), detail);
    return false;
  }
  record.principal = auth.principal;
  // The usage path is never forwarded: a plugin that declined to validate it has nothing to log.
  if (!record.readsUsage) record.unvalidated = auth.unvalidated === true;
  return true;
}
