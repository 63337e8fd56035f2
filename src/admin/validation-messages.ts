/** One Ajv error, as fastify hands them over in `error.validation`. */
export interface ValidationIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

const keyPath = (pointer: string) =>
  pointer
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((text, part) => (/^\d+$/.test(part) ? `${text}[${part}]` : text ? `${text}.${part}` : part), '');

const join = (base: string, key: unknown) => (base ? `${base}.${String(key)}` : String(key));

const article = (type: unknown) =>
  /^[aeiou]/.test(String(type)) ? `an ${String(type)}` : `a ${String(type)}`;

/**
 * Ajv errors as messages that name the field: `restrictions[0].type: must be one of throttle, throttlemb`.
 * A field that matched no branch of a "string or number" choice gets one message, not three.
 */
export function validationMessages(issues: readonly ValidationIssue[], context = 'body'): string[] {
  const choicePaths = new Set(
    issues.filter((issue) => issue.keyword === 'anyOf').map((issue) => issue.instancePath),
  );
  const messages = issues.flatMap((issue) => {
    const base = keyPath(issue.instancePath);
    if (choicePaths.has(issue.instancePath)) {
      return issue.keyword === 'anyOf' ? [`${base}: must be a number or a string of digits`] : [];
    }
    switch (issue.keyword) {
      case 'required':
        return [`${join(base, issue.params.missingProperty)}: is required`];
      case 'additionalProperties':
        return [`${join(base, issue.params.additionalProperty)}: unknown field`];
      case 'enum':
        return [`${base}: must be one of ${(issue.params.allowedValues as unknown[]).join(', ')}`];
      case 'type':
        return [`${base || context}: must be ${article(issue.params.type)}`];
      default:
        return [`${base || context}: ${issue.message ?? 'is invalid'}`];
    }
  });
  return [...new Set(messages)];
}
