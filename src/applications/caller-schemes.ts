/** What of a config says which authentication schemes it uses (`S`: the schemes' names). */
export interface AuthSettings<S extends string = string> {
  readonly APIKeyAuthType: S;
  readonly apis: ReadonlyArray<{
    readonly auth?: S | readonly S[];
    readonly methods: ReadonlyArray<{ readonly auth?: S | readonly S[] }>;
  }>;
}

/** The schemes a config uses: `APIKeyAuthType` (first), and every scheme an API or a method names. */
export function schemesNamed<S extends string>(config: AuthSettings<S>): ReadonlySet<S> {
  const named = new Set<S>([config.APIKeyAuthType]);
  const note = (auth: S | readonly S[] | undefined) => {
    for (const scheme of typeof auth === 'string' ? [auth] : (auth ?? [])) named.add(scheme);
  };
  for (const api of config.apis) {
    note(api.auth);
    for (const method of api.methods) note(method.auth);
  }
  return named;
}

/** The schemes whose callers are identities nobody lists in advance: the directory's, the tokens', the plugin's. */
const identitySchemes: ReadonlySet<string> = new Set(['ldap', 'jwt', 'plugin']);

/** Whether `scheme` is one whose callers are identities (ldap, jwt, plugin), not applications with keys. */
export const isIdentityScheme = (scheme: string): boolean => identitySchemes.has(scheme);

/** Whether some operation of the config authenticates its callers by an identity (ldap, jwt, plugin). */
export const namesIdentities = (config: AuthSettings): boolean =>
  [...schemesNamed(config)].some(isIdentityScheme);

/** Whether some operation of the config authenticates its callers by the keys of applications (basic, apikey). */
export const namesKeys = (config: AuthSettings): boolean =>
  [...schemesNamed(config)].some((scheme) => scheme === 'basic' || scheme === 'apikey');
