import { describe, expect, it } from 'vitest';
import {
  DeadlineExceeded,
  failureOutcome,
  InvalidUpstreamResponse,
  timedOut,
  UpgradeTimeout,
} from '../../src/upstream/outcomes.js';

/** An error as undici or Node's parser raises one, with its code. */
const coded = (code: string, message = 'failed'): Error => Object.assign(new Error(message), { code });

describe('how a failed upstream exchange ended', () => {
  it.each([
    [coded('UND_ERR_HEADERS_TIMEOUT'), false, 'timeout'],
    [coded('UND_ERR_BODY_TIMEOUT'), true, 'timeout'],
    [new DeadlineExceeded('deadline'), false, 'timeout'],
    [new UpgradeTimeout('upgrade'), false, 'timeout'],
    [new InvalidUpstreamResponse('status 99'), true, 'invalid'],
    [coded('HPE_INVALID_CONSTANT'), false, 'invalid'],
    [coded('UND_ERR_SOCKET', 'bad upgrade'), false, 'invalid'],
    [coded('UND_ERR_SOCKET', 'other side closed'), true, 'reset'],
    [coded('ECONNREFUSED'), false, 'unreachable'],
  ] as const)('takes %s (head came: %s) for %s', (error, answered, outcome) => {
    expect(failureOutcome(error, answered)).toBe(outcome);
  });

  it('tells the client 504 for time only', () => {
    expect(timedOut(coded('UND_ERR_HEADERS_TIMEOUT'))).toBe(true);
    expect(timedOut(coded('ECONNRESET'))).toBe(false);
  });
});
