import { announcesBody } from '../edge/request-screening.js';
import type { ExchangeRecord } from '../record.js';
import { dataPlaneErrors, sendError, type DataPlaneErrorCode } from './errors.js';
import { sendJson } from './json.js';

/**
 * The fields that close the connection after an answer given instead of forwarding: a body the client
 * announced has not been read, and the connection closes rather than read it, or take its first bytes
 * for the next request when a client that waited for `100 Continue` sends no body.
 */
function closing(record: ExchangeRecord): readonly string[] {
  return announcesBody(record.req) && !record.fields.includes('connection') ? ['connection', 'close'] : [];
}

/**
 * Answers an error instead of forwarding, in the form the request's edge reads (JSON, or a gRPC status:
 * `sendError`). The access line and the metrics keep the HTTP status, whichever form answered it.
 * @param extra response fields besides the record's own (Retry-After, Allow, a challenge)
 * @param detail what the client can do about it, after the code's message
 */
export function refuse(
  record: ExchangeRecord,
  code: DataPlaneErrorCode,
  extra: readonly string[] = [],
  detail?: string,
): void {
  if (!record.res.headersSent) record.status = dataPlaneErrors[code].status;
  record.refusedWith = code;
  record.answeredBytes += sendError(
    record.res,
    code,
    [...record.fields, ...extra, ...closing(record)],
    detail,
  );
}

/** Answers the gateway's own JSON (the usage path's), with the record's fields. */
export function answerJson(record: ExchangeRecord, extra: readonly string[], body: string): void {
  record.status = 200;
  record.answeredBytes += sendJson(record.res, 200, [...record.fields, ...extra, ...closing(record)], body);
}
