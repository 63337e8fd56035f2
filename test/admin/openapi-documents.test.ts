import { validate as validateSpecification } from '@readme/openapi-parser';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminUser,
  petsConfig,
  startTestGateway,
  userAuth,
  withMethods,
  type TestGateway,
} from '../helpers/test-gateway.js';

/**
 * Both OpenAPI documents of the admin port (the Quota API's, and the proxied APIs' of the catalog) pass
 * two independent validators: @seriousme/openapi-schema-validator (the OpenAPI JSON Schema) and
 * @readme/openapi-parser (the specification's own rules: declared path parameters, unique operationIds,
 * resolvable references). Fetched from a real gateway on 127.0.0.1.
 */
type Operation = {
  operationId?: string;
  parameters?: Array<{ name: string; in: string; required?: boolean }>;
  responses: Record<string, { headers?: Record<string, unknown> }>;
};
type Document = {
  info: { description?: string };
  servers?: Array<{ url: string; variables?: Record<string, { default: string }> }>;
  paths: Record<string, Record<string, Operation>>;
};

let gateway: TestGateway;
beforeAll(async () => {
  // A second API whose method shares a name with one of the first: operationIds must still differ.
  const config = withMethods(petsConfig('http://127.0.0.1:9/pets'), [
    {
      id: '2c4e6a8b-0d1f-4a3c-8e5b-7d9f1b3d5f7a',
      name: 'getPet',
      verb: 'DELETE',
      path: '/{petId}/tags/{tag}',
    },
  ]);
  gateway = await startTestGateway(config);
});
afterAll(() => gateway.close());

async function documentAt(path: string): Promise<Document> {
  const res = await fetch(`${gateway.adminUrl}${path}`, { headers: { authorization: userAuth(adminUser) } });
  expect(res.status).toBe(200);
  return (await res.json()) as Document;
}

async function expectValid(document: Document): Promise<void> {
  const schema = await new Validator().validate(structuredClone(document));
  expect(schema.errors ?? []).toEqual([]);
  const specification = await validateSpecification(structuredClone(document) as never);
  expect(specification.valid ? [] : specification.errors).toEqual([]);
}

const operations = (document: Document) =>
  Object.entries(document.paths).flatMap(([path, verbs]) =>
    Object.entries(verbs).map(([verb, operation]) => ({ path, verb, operation })),
  );

describe('the Quota API document', () => {
  it('validates, and names every operation once', async () => {
    const document = await documentAt('/api/portal/v1.3/openapi.json');
    await expectValid(document);
    const ids = operations(document).map(({ operation }) => operation.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('declares the fields a client works with: ETag, Location, If-Match, WWW-Authenticate, CSRF-Token', async () => {
    const { paths } = await documentAt('/api/portal/v1.3/openapi.json');
    const quota = paths['/api/portal/v1.3/quotas/{id}']!;
    expect(Object.keys(quota.get!.responses['200']!.headers!)).toEqual(['ETag']);
    expect(Object.keys(paths['/api/portal/v1.3/quotas']!.post!.responses['201']!.headers!).sort()).toEqual([
      'ETag',
      'Location',
    ]);
    for (const operation of [
      quota.put!,
      quota.delete!,
      paths['/api/portal/v1.3/applications/{id}/quota']!.put!,
    ]) {
      expect(operation.parameters).toContainEqual(
        expect.objectContaining({ name: 'if-match', in: 'header' }),
      );
    }
    for (const { operation } of operations({ paths } as Document)) {
      if (operation.responses['401'])
        expect(operation.responses['401'].headers).toHaveProperty('WWW-Authenticate');
    }
    expect(Object.keys(paths['/api/portal/v1.3/login']!.post!.responses['303']!.headers!).sort()).toEqual([
      'CSRF-Token',
      'Location',
      'Set-Cookie',
    ]);
  });
});

describe('the document of the proxied APIs', () => {
  it('validates: path parameters declared, operationIds unique, a server to call', async () => {
    const document = await documentAt('/api/portal/v1.3/apis/openapi.json');
    await expectValid(document);
    const tagged = document.paths['/pets/{petId}/tags/{tag}']!.delete!;
    expect(tagged.parameters?.map((parameter) => [parameter.name, parameter.in, parameter.required])).toEqual(
      [
        ['petId', 'path', true],
        ['tag', 'path', true],
      ],
    );
    const ids = operations(document).map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toContain('listPets');
    const [server] = document.servers!;
    expect(server!.url).toBe(`http://{host}:0`);
    expect(server!.variables!.host!.default).toBe('127.0.0.1');
  });

  it('says how to authenticate, and documents the answers of the gateway itself (401, 429, …)', async () => {
    const document = await documentAt('/api/portal/v1.3/apis/openapi.json');
    expect(document.info.description).toContain(
      "Send the application's API key as the username of HTTP basic",
    );
    for (const { operation } of operations(document)) {
      expect(Object.keys(operation.responses)).toEqual(
        expect.arrayContaining(['default', '401', '413', '429', '502', '503', '504']),
      );
      expect(Object.keys(operation.responses['429']!.headers!)).toEqual(
        expect.arrayContaining(['Retry-After', 'RateLimit', 'RateLimit-Policy']),
      );
      expect(operation.responses['401']!.headers).toHaveProperty('WWW-Authenticate');
    }
  });
});
