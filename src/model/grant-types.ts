// The `grant_type` values of the token endpoint (RFC 6749 §4 and the extension grants), in one place:
// the grants of src/oauth/grants/ answer them, client profiles default to them, client provisioning,
// dynamic registration, client metadata documents, the authorization and device endpoints check a
// client holds them, and the upstream token exchange sends one to the IdP. A `token_type_hint` or
// token type of the same spelling (`refresh_token`) is not a grant type and is not named here.

/** RFC 6749 §4.4. */
export const GRANT_CLIENT_CREDENTIALS = 'client_credentials';
/** RFC 6749 §6. */
export const GRANT_REFRESH_TOKEN = 'refresh_token';
/** RFC 6749 §4.1.3. */
export const GRANT_AUTHORIZATION_CODE = 'authorization_code';
/** RFC 8628 §3.4: the device authorization grant. */
export const GRANT_DEVICE_CODE = 'urn:ietf:params:oauth:grant-type:device_code';
/** RFC 8693 §2.1. */
export const GRANT_TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** RFC 7523 §2.1: here only with an Identity Assertion JWT Authorization Grant (ID-JAG) as the assertion. */
export const GRANT_JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
