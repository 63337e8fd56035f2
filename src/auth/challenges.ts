/** The realm every challenge of the data plane names (RFC 9110 section 11.5). */
export const realm = 'quotagate';

/** The challenge of the basic and ldap schemes (RFC 7617). */
export const basicChallenge = `Basic realm="${realm}", charset="UTF-8"`;

/** RFC 6750 section 3: a request without a token gets the bare challenge, with no error code. */
export const bearerChallenge = `Bearer realm="${realm}"`;

/**
 * What a list of schemes says for `apikey`, which no HTTP authentication scheme carries: the list names
 * it so that each of its schemes has a challenge (RFC 9110 section 11.6.1). The apikey scheme alone sends
 * none, as before lists.
 */
export const apiKeyChallenge = `APIKey realm="${realm}", field="APIKey"`;
