// oidc-provider ships no type declarations; demo/idp.ts describes the slice it uses (OidcProvider).
declare module 'oidc-provider' {
  const Provider: unknown;
  export default Provider;
}
