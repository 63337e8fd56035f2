import type { AuthResult } from '../../auth/authenticator.js';
import { authRefusalDetails } from '../answers/errors.js';
import { refuse } from '../answers/refusal.js';
import type { ExchangeRecord } from '../record.js';
import { isPromise, type Next, type StepContext } from './context.js';

/**
 * Step 3: the authenticator of the operation routed (its `auth`, else APIKeyAuthType's), on the path
 * routed; a promise only when it has to wait.
 */
export function authenticate(_context: StepContext, record: ExchangeRecord): Next {
  const auth = record.authenticator().authenticate(record.req, record.res, record.routedPath);
  if (isPromise(auth)) return auth.then((result) => authenticated(record, result));
  return authenticated(record, auth);
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
