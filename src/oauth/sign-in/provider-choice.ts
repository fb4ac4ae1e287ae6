// Which identity provider a browser signs in at, when several are configured: named by `idp` on the
// URL that starts a sign-in (a link of the chooser page), or found from the domain of an e-mail
// (`login_hint`: the chooser's field, or an OpenID `login_hint` the client sent). Otherwise the
// chooser page is shown. One provider: nothing is asked, nothing changes.

import type { ServerResponse } from 'node:http';
import type { IdpSignIn } from '../oidc-client.ts';
import { providerForEmail } from '../providers.ts';
import { providerChooserPage } from '../sign-in-pages.ts';
import { writePage } from '../../web/pages.ts';

/** The provider chosen (absent with one provider), and the e-mail to pass on as the IdP's login hint. */
export interface ProviderChoice {
  provider?: string;
  loginHint?: string;
}

const EMAIL = /^[^\s@]{1,256}@[^\s@]{1,253}$/;

/**
 * The choice `query` makes, or the chooser page written to `res` (undefined) when it makes none.
 * `action`: the absolute URL of the page asked (its query is kept, `idp` and `login_hint` replaced).
 */
export function chooseProvider(signIn: IdpSignIn, query: URLSearchParams, res: ServerResponse, action: string): ProviderChoice | undefined {
  const { providers } = signIn;
  if (providers.length <= 1) return {};
  const named = query.getAll('idp');
  if (named.length === 1 && providers.some((p) => p.name === named[0])) return { provider: named[0]! };
  let error: string | undefined;
  const hints = query.getAll('login_hint');
  if (named.length === 0 && hints.length === 1 && hints[0] !== '') {
    const hint = hints[0]!;
    const provider = EMAIL.test(hint) ? providerForEmail(providers, hint) : undefined;
    if (provider !== undefined) return { provider, loginHint: hint };
    error = 'No sign-in is set up for that e-mail address here: choose where your account is.';
  }
  const kept = [...query].filter(([k]) => k !== 'idp' && k !== 'login_hint');
  const hrefFor = (name: string) => {
    const url = new URL(action);
    for (const [k, v] of kept) url.searchParams.append(k, v);
    url.searchParams.set('idp', name);
    return url.href;
  };
  writePage(
    res,
    200,
    providerChooserPage({
      providers: providers.map((p) => ({ name: p.name, host: new URL(p.issuer).host, href: hrefFor(p.name) })),
      email: providers.some((p) => p.domains.length > 0) ? { action, hidden: kept } : undefined,
      ...(error !== undefined ? { error } : {}),
    }),
  );
  return undefined;
}
