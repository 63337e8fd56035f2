import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileCatalog } from '../../src/catalog/router.js';
import type { ApiConfig, MethodConfig } from '../../src/config/schema.js';

const petsApi = (methods: MethodConfig[], caseSensitive = false, basePath = '/pets'): ApiConfig => ({
  id: 'pets',
  name: 'pets',
  basePath,
  upstream: 'http://127.0.0.1:9000',
  methods,
  caseSensitive,
  passUndeclared: false,
  protocol: 'http',
  websocket: true,
});

const method = (id: string, verb: MethodConfig['verb'], path: string): MethodConfig => ({
  id,
  name: id,
  verb,
  path,
});

/** The segments of a catalog path (the config refuses empty ones, so `//` and a trailing slash). */
const segmentsOf = (path: string) => path.split('/').filter((segment) => segment !== '');

/**
 * The method OpenAPI's rule picks, written without the router's sorting: of the templates that match,
 * the one whose segments are literal where the others' are parameters, from the left (fastify's
 * find-my-way tries the static child of a node before its parameter). Declaration order plays no part.
 */
function expectedMethod(api: ApiConfig, verb: string, request: readonly string[]): string | null {
  const routed = verb === 'HEAD' ? 'GET' : verb;
  const base = segmentsOf(api.basePath);
  const same = (a: string, b: string) => (api.caseSensitive ? a === b : a.toLowerCase() === b.toLowerCase());
  if (base.length > request.length || base.some((segment, i) => !same(segment, request[i]!))) return null;
  const tail = request.slice(base.length);
  const candidates = api.methods.filter((candidate) => {
    if (candidate.verb !== routed) return false;
    const pattern = segmentsOf(candidate.path);
    return (
      pattern.length === tail.length &&
      pattern.every((segment, i) => segment.startsWith('{') || same(segment, tail[i]!))
    );
  });
  const literalMask = (candidate: MethodConfig) =>
    segmentsOf(candidate.path)
      .map((segment) => (segment.startsWith('{') ? '0' : '1'))
      .join('');
  let best: MethodConfig | null = null;
  for (const candidate of candidates) {
    if (best === null || literalMask(candidate) > literalMask(best)) best = candidate;
  }
  return best?.id ?? null;
}

const routedMethod = (api: ApiConfig, verb: string, request: readonly string[], trailingSlash = false) =>
  compileCatalog([api]).match(verb, request, trailingSlash, '')?.method?.id ?? null;

describe('routing by specificity, whatever the order of the catalog', () => {
  it('routes a literal path declared after a templated one and after the root to the literal method', () => {
    const api = petsApi([
      method('getPet', 'GET', '/{petId}'),
      method('listPets', 'GET', '/'),
      method('addPet', 'POST', '/'),
      method('stream', 'GET', '/stream'),
    ]);
    expect(routedMethod(api, 'GET', ['pets', 'stream'])).toBe('stream');
    expect(routedMethod(api, 'GET', ['pets', '7'])).toBe('getPet');
    expect(routedMethod(api, 'GET', ['pets'])).toBe('listPets');
  });

  it('prefers the literal at the leftmost position where two templates differ', () => {
    const api = petsApi([
      method('paramFirst', 'GET', '/{id}/photos/{photoId}'),
      method('literalFirst', 'GET', '/mine/{section}/{photoId}'),
      method('twoParams', 'GET', '/{id}/{section}/{photoId}'),
    ]);
    expect(routedMethod(api, 'GET', ['pets', 'mine', 'photos', '1'])).toBe('literalFirst');
    expect(routedMethod(api, 'GET', ['pets', '7', 'photos', '1'])).toBe('paramFirst');
    expect(routedMethod(api, 'GET', ['pets', '7', 'toys', '1'])).toBe('twoParams');
  });

  const literals = ['stream', 'Stream', 'a', 'photos'];
  const segment = fc.oneof(fc.constantFrom(...literals), fc.constant('{p}'));
  const template = fc.array(segment, { maxLength: 3 }).map((segments) => `/${segments.join('/')}`);
  // Templates as the config takes them: no empty segment, so no trailing slash (a request's may have one).
  const declared = fc.record({ verb: fc.constantFrom<MethodConfig['verb']>('GET', 'POST'), path: template });
  /** What the config refuses as a duplicate route: parameters blanked, case folded unless kept. */
  const routeShape = (caseSensitive: boolean) => (entry: { verb: string; path: string }) => {
    const shape = segmentsOf(entry.path)
      .map((part) => (part.startsWith('{') ? '{}' : part))
      .join('/');
    return `${entry.verb} ${caseSensitive ? shape : shape.toLowerCase()}`;
  };
  const catalog = fc.boolean().chain((caseSensitive) =>
    fc.record({
      caseSensitive: fc.constant(caseSensitive),
      basePath: fc.constantFrom('/', '/pets', '/pets/v1'),
      methods: fc.uniqueArray(declared, { maxLength: 8, selector: routeShape(caseSensitive) }),
    }),
  );
  const request = fc.record({
    verb: fc.constantFrom('GET', 'HEAD', 'POST'),
    tail: fc.array(fc.constantFrom(...literals, 'STREAM', '42', 'x'), { maxLength: 3 }),
    trailingSlash: fc.boolean(),
  });

  it('routes every request of a generated catalog to the most specific match, in any declaration order', () => {
    fc.assert(
      fc.property(catalog, fc.array(request, { minLength: 1, maxLength: 12 }), (generated, requests) => {
        const methods = generated.methods.map((entry, i) => method(`m${i}`, entry.verb, entry.path));
        const api = petsApi(methods, generated.caseSensitive, generated.basePath);
        const orders = [methods, [...methods].reverse(), [...methods.slice(1), ...methods.slice(0, 1)]];
        for (const { verb, tail, trailingSlash } of requests) {
          const path = [...segmentsOf(generated.basePath), ...tail];
          const expected = expectedMethod(api, verb, path);
          for (const order of orders) {
            const routed = routedMethod({ ...api, methods: order }, verb, path, trailingSlash);
            expect(routed, `${verb} /${path.join('/')}${trailingSlash ? '/' : ''}`).toBe(expected);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});
