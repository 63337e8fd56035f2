import type { Attributes, Span, SpanStatusCode } from '@opentelemetry/api';
import type { ExchangeTrace } from '../observe/tracing.js';

// Types only, as in observe/tracing.ts: a gateway without tracing loads nothing of OpenTelemetry.

/**
 * What a scheme is handed to trace its own exchanges with other services (an LDAP bind, a JWKS fetch):
 * the exchange's trace, and the authentication span (recording) they hang under as client spans.
 */
export interface AuthTracing {
  readonly trace: ExchangeTrace;
  /** The authentication span, `quotagate.authenticate`. */
  readonly span: Span;
}

/** `SpanStatusCode.ERROR`, written as its value: the enum itself would load the API. */
export const spanError = 2 as SpanStatusCode.ERROR;

/** Starts a client span under the authentication span; its starter ends it. */
export const startClientSpan = (tracing: AuthTracing, name: string, attributes: Attributes): Span =>
  tracing.trace.child(name, 'client', attributes, tracing.span);

/** Marks `span` failed: `error.type` (a status code, an error's class) and the span's status. */
export function markFailed(span: Span, errorType: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus({ code: spanError, message: errorType });
}

/**
 * `server.address` and `server.port` of a URL (the scheme's default port when it names none), as the
 * semantic conventions of a client span have them.
 */
export function serverOf(url: string, defaultPort: number): Attributes {
  const { hostname, port } = new URL(url);
  // An IPv6 literal's brackets are the URL's, not the address's.
  const address = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return { 'server.address': address, 'server.port': port === '' ? defaultPort : Number(port) };
}
