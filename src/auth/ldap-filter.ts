import { Filter } from 'ldapts';

/**
 * Fills `{{name}}` placeholders of an LDAP filter template with values escaped per RFC 4515, so that a
 * username such as `*)(uid=*` matches itself and nothing else.
 */
export function fillFilter(template: string, values: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (placeholder, name: string) =>
    Object.hasOwn(values, name) ? Filter.escape(values[name]!) : placeholder,
  );
}
