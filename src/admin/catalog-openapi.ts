import type { AuthDocumentation } from '../auth/authenticator.js';
import type { ApiConfig } from '../config/schema.js';

type SecurityDefinition = Record<string, unknown> & { type?: unknown };

/** Swagger 2.0 security definitions (what plugins return) in their OpenAPI 3 form. */
function toSecuritySchemes(definitions: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(definitions).map(([name, value]) => {
      const definition = value as SecurityDefinition;
      return [
        name,
        definition.type === 'basic' ? { ...definition, type: 'http', scheme: 'basic' } : definition,
      ];
    }),
  );
}

const joinPath = (basePath: string, path: string) =>
  `${basePath === '/' ? '' : basePath}${path === '/' ? '' : path}` || '/';

/**
 * The OpenAPI 3 description of the proxied APIs: one operation per catalog method, secured the way the
 * configured scheme (or the plugin's getSwaggerSecurity) says.
 */
export function catalogOpenApi(apis: readonly ApiConfig[], auth: AuthDocumentation): Record<string, unknown> {
  const { securityDefinitions, security } = auth.swaggerSecurity();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const api of apis) {
    for (const method of api.methods) {
      const path = joinPath(api.basePath, method.path);
      paths[path] ??= {};
      paths[path][method.verb.toLowerCase()] = {
        operationId: method.name,
        tags: [api.name],
        ...(method.description ? { description: method.description } : {}),
        'x-quotagate-api-id': api.id,
        'x-quotagate-method-id': method.id,
        responses: {
          default: { description: 'The upstream response' },
          '401': { description: 'Unauthorized' },
        },
      };
    }
  }
  return {
    openapi: '3.0.3',
    info: { title: 'APIs behind quotagate', version: '1.0.0' },
    paths,
    components: { securitySchemes: toSecuritySchemes(securityDefinitions) },
    security,
  };
}
