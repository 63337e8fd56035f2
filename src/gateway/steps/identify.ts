import type { IncomingMessage, ServerResponse } from 'node:http';
import { notePeer } from '../../upstream/fields/forwarded.js';
import { takeRequest } from '../edge/http1.js';
import { ExchangeRecord } from '../record.js';
import { requestIdOf } from '../request-id.js';
import type { RuleSet } from '../rule-set.js';

/**
 * Step 1: the request id, and the record that follows the request to its access-log line, with the facts
 * its edge gives it. The request starts on `ruleSet`, and keeps it to its end.
 * @param head for a request that came through the 'upgrade' event, the bytes that followed its head
 * @param draining the gateway is shutting down: the answer asks the client to close its connection
 */
export function identify(
  req: IncomingMessage,
  res: ServerResponse,
  expectsContinue: boolean,
  head: Buffer | null,
  ruleSet: RuleSet,
  draining: boolean,
): ExchangeRecord {
  notePeer(req);
  const record = new ExchangeRecord(req, res, requestIdOf(req), expectsContinue, ruleSet);
  takeRequest(record, head);
  ruleSet.enter();
  // An upgrade request's connection closes after any answer but a 101, which must not say so.
  if (draining && head === null) record.fields.push('connection', 'close');
  return record;
}
