import { describe, expect, it } from 'vitest';
import { normalizeTarget } from '../../src/kit/normalize-path.js';

const pathOf = (target: string, host = 'gw.test') => {
  const result = normalizeTarget(target, host);
  if (!result.ok) return `rejected: ${result.reason}`;
  return `/${result.segments.join('/')}${result.trailingSlash ? '/' : ''}${result.query}`;
};

describe('normalizeTarget', () => {
  it.each([
    ['/pets/1', '/pets/1'],
    ['/pets/../pets/1', '/pets/1'],
    ['/pets/./1', '/pets/1'],
    ['//pets/1', '/pets/1'],
    ['/pets//1', '/pets/1'],
    ['/pets/%2e%2e/x', '/x'],
    ['/pets/.%2E/store/1', '/store/1'],
    ['/%70ets/1', '/pets/1'],
    ['/pets/%7e%41', '/pets/~A'],
    ['/pets/a%c3%a9', '/pets/a%C3%A9'],
    ['/pets/a%20b', '/pets/a%20b'],
    ['/pets/1/', '/pets/1/'],
    ['/pets/1/..', '/pets/'],
    ['/pets?status=sold&x=%2f', '/pets?status=sold&x=%2f'],
    ['/pets/1?a=../b', '/pets/1?a=../b'],
    ['/', '/'],
    ['http://gw.test/pets/1?x=1', '/pets/1?x=1'],
    ['HTTP://GW.TEST/pets', '/pets'],
  ])('normalizes %s to %s', (target, expected) => {
    expect(pathOf(target)).toBe(expected);
  });

  it.each([
    ['/pets\\x', 'backslash in path'],
    ['/pets/%5cx', 'encoded slash or backslash in path'],
    ['/pets/%2f..%2fadmin', 'encoded slash or backslash in path'],
    ['/pets/%2F1', 'encoded slash or backslash in path'],
    ['/pets/%00', 'NUL in path'],
    ['/pets/%zz', 'malformed percent-encoding'],
    ['/pets/%4', 'malformed percent-encoding'],
    ['/..', 'path climbs above the root'],
    ['/pets/../../etc/passwd', 'path climbs above the root'],
    ['/pets#frag', 'fragment in request target'],
    ['/pets/1?x=1#frag', 'fragment in request target'],
    ['/pets/1?#', 'fragment in request target'],
    ['http://evil.test/pets/1', 'the request target names another host'],
    ['*', 'the request target must be a path'],
    ['gw.test:443', 'the request target must be a path'],
    ['/pets/1;jsessionid=abc', 'matrix parameter in path'],
    ['/pets/..;/admin', 'matrix parameter in path'],
    ['/pets;/1', 'matrix parameter in path'],
    ['/pets/1%3Bx', 'matrix parameter in path'],
    ['/pets/1.', 'segment ending in a dot'],
    ['/pets/findByStatus./x', 'segment ending in a dot'],
    ['/pets/...', 'segment ending in a dot'],
    ['/pets/1%2e', 'segment ending in a dot'],
    ['/pets/1%20', 'segment ending in a space'],
    ['/pets/1%20/x', 'segment ending in a space'],
    ['/pets/%2566', 'encoded percent sign in path'],
    ['/pets/%25', 'encoded percent sign in path'],
    ['/pets/1%0a', 'encoded control character in path'],
    ['/pets/1%09', 'encoded control character in path'],
    ['/pets/%7f', 'encoded control character in path'],
    ['/pets/%c0%ae%c0%ae/x', 'percent-encoding that is not UTF-8'],
    ['/pets/%e0%80%ae', 'percent-encoding that is not UTF-8'],
    ['/pets/%ff', 'percent-encoding that is not UTF-8'],
    ['/pets/%c3', 'percent-encoding that is not UTF-8'],
    ['/pets/%ed%a0%80', 'percent-encoding that is not UTF-8'],
    ['/pets/%E2%84%AAennel', 'a character that case-insensitive matching reads as ASCII'],
    ['/pets/findByStatu%C5%BF', 'a character that case-insensitive matching reads as ASCII'],
    ['/pets/l%C4%B1st', 'a character that case-insensitive matching reads as ASCII'],
    ['/pets/%C4%B0d', 'a character that case-insensitive matching reads as ASCII'],
  ])('rejects %s (%s)', (target, reason) => {
    expect(pathOf(target)).toBe(`rejected: ${reason}`);
  });

  it('rejects an absolute-form target when the request has no Host', () => {
    expect(normalizeTarget('http://gw.test/pets', undefined)).toEqual({
      ok: false,
      reason: 'the request target names another host',
    });
  });
});
