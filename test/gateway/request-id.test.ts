import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { newRequestId, requestIdOf } from '../../src/gateway/request-id.js';

const offering = (id?: string) =>
  ({ headers: id === undefined ? {} : { 'x-request-id': id } }) as IncomingMessage;
const made = /^([A-Za-z0-9_-]{16})-(\d+)$/;

describe('request ids', () => {
  it('keeps a client id that is one short token', () => {
    expect(requestIdOf(offering('abc-123:x@y.z'))).toBe('abc-123:x@y.z');
  });

  it.each([['not a token'], ['x'.repeat(129)], [''], ['a"b']])('replaces the client id %j', (offered) => {
    expect(requestIdOf(offering(offered))).toMatch(made);
  });

  it('makes ids of the process prefix (96 random bits) and a counter, each id once', () => {
    const [first, second] = [requestIdOf(offering()), newRequestId()].map((id) => made.exec(id)!);
    expect(first![1]).toBe(second![1]);
    expect(Number(second![2])).toBe(Number(first![2]) + 1);
    const many = new Set(Array.from({ length: 10_000 }, newRequestId));
    expect(many.size).toBe(10_000);
  });

  it('makes ids a client could send back unchanged', () => {
    const id = newRequestId();
    expect(requestIdOf(offering(id))).toBe(id);
  });
});
