import { describe, expect, it } from 'vitest';
import { normalizeTarget } from '../../src/catalog/normalize-path.js';
import { compileCatalog } from '../../src/catalog/router.js';
import type { ApiConfig } from '../../src/config/schema.js';

const api = (
  id: string,
  basePath: string,
  upstream: string,
  methods: ApiConfig['methods'] = [],
): ApiConfig => ({
  id,
  name: id,
  basePath,
  upstream,
  methods,
});

const router = compileCatalog([
  api('pets', '/pets', 'http://127.0.0.1:9000/v2/pets', [
    { id: 'getPet', name: 'getPet', verb: 'GET', path: '/{petId}' },
    { id: 'findByStatus', name: 'findByStatus', verb: 'GET', path: '/findByStatus' },
    { id: 'listPets', name: 'listPets', verb: 'GET', path: '/' },
    { id: 'addPet', name: 'addPet', verb: 'POST', path: '/' },
    { id: 'petPhoto', name: 'petPhoto', verb: 'PUT', path: '/{petId}/photos/{photoId}' },
    { id: 'tilde', name: 'tilde', verb: 'GET', path: '/%7euser/items' },
  ]),
  api('pets-admin', '/pets/admin', 'http://127.0.0.1:9001'),
  api('root', '/', 'https://fallback.test/'),
]);

const route = (verb: string, target: string) => {
  const normalized = normalizeTarget(target, 'gw.test');
  if (!normalized.ok) throw new Error(normalized.reason);
  const match = router.match(verb, normalized.segments, normalized.trailingSlash, normalized.query);
  return (
    match && { api: match.api.config.id, method: match.method?.id ?? null, upstream: match.upstreamTarget }
  );
};

describe('compileCatalog', () => {
  it('routes a templated path to its method and strips the basePath for the upstream', () => {
    expect(route('GET', '/pets/42?x=1')).toEqual({
      api: 'pets',
      method: 'getPet',
      upstream: '/v2/pets/42?x=1',
    });
  });

  it('prefers a literal segment over a parameter', () => {
    expect(route('GET', '/pets/findByStatus')).toMatchObject({ method: 'findByStatus' });
  });

  it('matches the method of the verb only', () => {
    expect(route('POST', '/pets')).toMatchObject({ method: 'addPet' });
    expect(route('DELETE', '/pets/1')).toEqual({ api: 'pets', method: null, upstream: '/v2/pets/1' });
  });

  it('matches HEAD as GET', () => {
    expect(route('HEAD', '/pets/7')).toMatchObject({ method: 'getPet' });
  });

  it('matches the root template / at the basePath itself', () => {
    expect(route('GET', '/pets')).toEqual({ api: 'pets', method: 'listPets', upstream: '/v2/pets' });
  });

  it('matches several parameters', () => {
    expect(route('PUT', '/pets/1/photos/2')).toMatchObject({ method: 'petPhoto' });
  });

  it('keeps a path inside the API that no method declares, with method null', () => {
    expect(route('GET', '/pets/1/owners')).toEqual({
      api: 'pets',
      method: null,
      upstream: '/v2/pets/1/owners',
    });
  });

  it('lets the longest basePath win', () => {
    expect(route('GET', '/pets/admin/users')).toEqual({
      api: 'pets-admin',
      method: null,
      upstream: '/users',
    });
  });

  it('does not treat a longer segment as a basePath prefix', () => {
    expect(route('GET', '/petsfood')).toMatchObject({ api: 'root', upstream: '/petsfood' });
  });

  it('matches a path with a trailing slash to its method and keeps the slash upstream', () => {
    expect(route('GET', '/pets/1/')).toEqual({ api: 'pets', method: 'getPet', upstream: '/v2/pets/1/' });
  });

  it('matches every spelling of a method path to that method', () => {
    for (const spelling of ['/pets/../pets/1', '//pets/1', '/pets/./1', '/%70ets/1', '/pets/x/../1']) {
      expect(route('GET', spelling), spelling).toMatchObject({ api: 'pets', method: 'getPet' });
    }
  });

  it('normalizes literal segments of templates like request segments', () => {
    expect(route('GET', '/pets/~user/items')).toMatchObject({ method: 'tilde' });
  });

  it('returns null when no API matches', () => {
    const catalog = compileCatalog([api('pets', '/pets', 'http://127.0.0.1:9000')]);
    expect(catalog.match('GET', ['store'], false, '')).toBeNull();
  });
});
