import { describe, expect, it } from 'vitest';
import { normalizeTarget } from '../../src/kit/normalize-path.js';
import { compileCatalog } from '../../src/catalog/router.js';
import type { ApiConfig } from '../../src/config/schema.js';

const api = (
  id: string,
  basePath: string,
  upstream: string,
  methods: ApiConfig['methods'] = [],
  options: Partial<Pick<ApiConfig, 'caseSensitive' | 'passUndeclared' | 'protocol'>> = {},
): ApiConfig => ({
  id,
  name: id,
  basePath,
  upstream,
  methods,
  caseSensitive: false,
  passUndeclared: false,
  protocol: 'http',
  websocket: true,
  ...options,
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
  api(
    'greeter',
    '/helloworld.Greeter',
    'http://127.0.0.1:50051',
    [
      { id: 'sayHello', name: 'SayHello', verb: 'POST', path: '/SayHello' },
      { id: 'sayHellos', name: 'SayHellos', verb: 'POST', path: '/SayHellos' },
    ],
    { protocol: 'grpc' },
  ),
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

  it('routes a gRPC call to its method by service and method name, and sends the whole path upstream', () => {
    expect(route('POST', '/helloworld.Greeter/SayHello')).toEqual({
      api: 'greeter',
      method: 'sayHello',
      upstream: '/helloworld.Greeter/SayHello',
    });
    expect(route('POST', '/helloworld.Greeter/SayHellos')).toMatchObject({ method: 'sayHellos' });
    expect(route('POST', '/helloworld.Greeter/SayGoodbye')).toMatchObject({ api: 'greeter', method: null });
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

  it('matches literal segments in any case and sends the catalog spelling upstream', () => {
    expect(route('GET', '/pets/findbystatus')).toEqual({
      api: 'pets',
      method: 'findByStatus',
      upstream: '/v2/pets/findByStatus',
    });
    expect(route('GET', '/PETS/FINDBYSTATUS?status=sold')).toEqual({
      api: 'pets',
      method: 'findByStatus',
      upstream: '/v2/pets/findByStatus?status=sold',
    });
    expect(route('PUT', '/Pets/1/PHOTOS/AbC')).toEqual({
      api: 'pets',
      method: 'petPhoto',
      upstream: '/v2/pets/1/photos/AbC',
    });
  });

  it('keeps parameters as sent, in their case', () => {
    expect(route('GET', '/pets/AbC')).toEqual({ api: 'pets', method: 'getPet', upstream: '/v2/pets/AbC' });
  });

  it('gives an auth plugin the routed path: the catalog spelling of the literals, with the query', () => {
    const normalized = normalizeTarget('/PETS/./x/../FindByStatus?status=sold', 'gw.test');
    if (!normalized.ok) throw new Error(normalized.reason);
    expect(router.match('GET', normalized.segments, false, normalized.query)?.path).toBe(
      '/pets/findByStatus?status=sold',
    );
  });

  it('matches literals only in their case in a caseSensitive API', () => {
    const strict = compileCatalog([
      api(
        'pets',
        '/pets',
        'http://127.0.0.1:9000',
        [
          { id: 'getPet', name: 'getPet', verb: 'GET', path: '/{petId}' },
          { id: 'findByStatus', name: 'findByStatus', verb: 'GET', path: '/findByStatus' },
        ],
        { caseSensitive: true },
      ),
    ]);
    expect(strict.match('GET', ['pets', 'findbystatus'], false, '')?.method?.id).toBe('getPet');
    expect(strict.match('GET', ['pets', 'findByStatus'], false, '')?.method?.id).toBe('findByStatus');
    expect(strict.match('GET', ['PETS', '1'], false, '')).toBeNull();
  });

  it('lists the verbs a path declares, with HEAD where GET is', () => {
    const match = router.match('DELETE', ['pets', '1'], false, '')!;
    expect(match.method).toBeNull();
    expect(router.allowedVerbs(match)).toEqual(['GET', 'HEAD']);
    expect(router.allowedVerbs(router.match('PATCH', ['PETS'], false, '')!)).toEqual(['GET', 'POST', 'HEAD']);
    expect(router.allowedVerbs(router.match('GET', ['pets', '1', 'owners'], false, '')!)).toEqual([]);
  });

  it('returns null when no API matches', () => {
    const catalog = compileCatalog([api('pets', '/pets', 'http://127.0.0.1:9000')]);
    expect(catalog.match('GET', ['store'], false, '')).toBeNull();
  });
});
