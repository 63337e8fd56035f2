import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { quotaAnswerSchema, quotaDtoSchema } from '../../src/quota/quota-schema.js';
import { useQuotaApiGateway } from '../helpers/quota-api-client.js';

describe.each(['memory', 'redis'] as const)('Quota API: OpenAPI (%s store)', (storeType) => {
  const { adminUrl } = useQuotaApiGateway(storeType);

  describe('OpenAPI', () => {
    it('serves a valid OpenAPI 3 document generated from the validating schemas', async () => {
      const res = await fetch(`${adminUrl()}/api/portal/v1.3/openapi.json`);
      expect(res.status).toBe(200);
      const document = (await res.json()) as {
        paths: Record<string, Record<string, unknown>>;
        components: { schemas: Record<string, unknown> };
      };
      const result = await new Validator().validate(document);
      expect(result.errors ?? []).toEqual([]);
      expect(result.valid).toBe(true);
      expect(Object.keys(document.paths).sort()).toEqual([
        '/api/portal/v1.3/applications',
        '/api/portal/v1.3/applications/{id}',
        '/api/portal/v1.3/applications/{id}/apikeys',
        '/api/portal/v1.3/applications/{id}/apikeys/{keyId}',
        '/api/portal/v1.3/applications/{id}/quota',
        '/api/portal/v1.3/applications/{id}/quota/reset',
        '/api/portal/v1.3/applications/{id}/usage/history',
        '/api/portal/v1.3/console/try',
        '/api/portal/v1.3/currentuser',
        '/api/portal/v1.3/failed-logins',
        '/api/portal/v1.3/login',
        '/api/portal/v1.3/notifications/test',
        '/api/portal/v1.3/quotas',
        '/api/portal/v1.3/quotas/{id}',
        '/api/portal/v1.3/quotas/{id}/usage',
        '/api/portal/v1.3/refused-quotas',
        '/api/portal/v1.3/upstreams',
        '/api/portal/v1.3/usage/history',
      ]);
      expect(Object.keys(document.paths['/api/portal/v1.3/applications/{id}/quota/reset']!)).toEqual([
        'post',
      ]);
      expect(Object.keys(document.paths['/api/portal/v1.3/quotas/{id}']!).sort()).toEqual([
        'delete',
        'get',
        'put',
      ]);
      // The components are the zod schemas that validate requests and stored records, as JSON Schema.
      expect(document.components.schemas['QuotaDTO']).toEqual(
        z.toJSONSchema(quotaDtoSchema(), { io: 'input', target: 'openapi-3.0' }),
      );
      expect(document.components.schemas['Quota']).toEqual(
        z.toJSONSchema(quotaAnswerSchema, { io: 'output', target: 'openapi-3.0' }),
      );
      expect(document.components.schemas['QuotaDTO']).toMatchObject({
        required: ['type', 'name', 'restrictions'],
        additionalProperties: false,
        properties: { restrictions: { type: 'array', maxItems: 100 } },
      });
      const post = document.paths['/api/portal/v1.3/quotas']!['post'] as {
        requestBody: { content: Record<string, { schema: unknown }> };
      };
      expect(post.requestBody.content['application/json']!.schema).toEqual({
        $ref: '#/components/schemas/QuotaDTO',
      });
    });
  });
});
