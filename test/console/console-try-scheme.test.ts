import { describe, expect, it } from 'vitest';
import type { AuthDocumentation } from '../../src/auth/authenticator.js';
import { builtInSecurity } from '../../src/auth/swagger-security.js';
import { catalogOpenApi } from '../../src/admin/catalog-openapi.js';
import type { Config } from '../../src/config/schema.js';
import { catalogFromOpenApi, tryScheme } from '../../src/console/logic/catalog.js';
import { petsConfig } from '../helpers/test-gateway.js';

const basicDocs: AuthDocumentation = { swaggerSecurity: builtInSecurity.basic };

describe("the console's scheme for each method's test request", () => {
  it("takes the method's own scheme, else its API's, else the catalog's", () => {
    const config = petsConfig('http://127.0.0.1:9/pets') as unknown as Config;
    const [pets] = config.apis;
    const [listPets, getPet, findByStatus, addPet] = pets!.methods;
    const read = catalogFromOpenApi(
      catalogOpenApi(
        {
          ...config,
          tls: undefined,
          apis: [
            { ...pets!, methods: [listPets!, { ...getPet!, auth: 'none' }] },
            {
              ...pets!,
              id: 'partners',
              basePath: '/partners',
              auth: 'jwt',
              methods: [findByStatus!, { ...addPet!, auth: ['jwt', 'apikey'] }],
            },
          ],
        } as Config,
        basicDocs,
      ),
    );
    const schemes = read.apis.flatMap((api) => api.methods.map((method) => [method.path, method.authType]));
    expect(schemes).toEqual([
      ['/pets', 'basic'],
      ['/pets/{petId}', 'none'],
      ['/partners/findByStatus', 'jwt'],
      ['/partners', 'apikey'],
    ]);
  });

  it('tries a list with a key scheme, for which the form asks nothing, else with its first scheme', () => {
    expect(tryScheme(['jwt', 'basic'])).toBe('basic');
    expect(tryScheme(['jwt', 'ldap'])).toBe('jwt');
    expect(tryScheme(['ldap', 'jwt'])).toBe('ldap');
    expect(tryScheme('none')).toBe('none');
  });
});
