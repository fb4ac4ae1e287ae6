// GET /device, POST /device: device sign-in (RFC 8628) in the browser. The user types the code a
// device shows; a code that names a pending device authorization leads to the same consent page and
// IdP round trip as /authorize, whose decision goes to the device's authorization. Entries are limited
// per address and per code; wrong ones are also counted server-wide (the bound on guessing from many
// addresses), and past that bound every address is held to a few entries a minute. A right code is
// never refused for what other addresses did: a guesser can slow everyone's guessing, not close the
// form to people who hold a code.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseForm, readBody, type Form } from '../../http/body.ts';
import { tooManyRequests } from '../../http/errors.ts';
import { WindowLimit } from '../../http/rate-limits.ts';
import { hashToken } from '../../model/credentials.ts';
import type { AuthorizationRequest } from '../../store/types.ts';
import { normaliseUserCode } from '../device.ts';
import { consentPage, deviceCodePage } from '../sign-in-pages.ts';
import { writePage } from '../../web/pages.ts';
import { checkFormPost } from './browser.ts';
import { PageError, SIGN_IN_OFF } from './errors.ts';
import { awaitConsent, sendTo, type SignInParts } from './parts.ts';
import type { IdpSignIn } from '../oidc-client.ts';
import { chooseProvider, type ProviderChoice } from './provider-choice.ts';

/** Device codes one client address (an IPv6 one as its network) may enter per minute (a person needs one or two; a guesser many). */
export const DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS = 10;
/**
 * Wrong device-code entries the whole server takes per minute, from every address together, before it
 * holds each address to DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING for the rest of the minute. Well
 * above what a few dozen addresses reach with their own allowance (31 addresses: 310).
 */
export const DEVICE_FAILED_ENTRIES_PER_MINUTE = 1000;
/**
 * Entries one address may make in a minute once the server-wide wrong entries ran out: enough for a
 * person who mistypes once or twice, a third of a guesser's usual allowance.
 */
export const DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING = 3;
/** Entries of one waiting code per minute, from every address together (a person enters theirs once or twice). */
export const DEVICE_ENTRIES_PER_MINUTE_PER_CODE = 10;
const FORM_MAX_BODY_BYTES = 4096;

export class DeviceEntryStage {
  readonly #parts: SignInParts;
  /** Device codes entered per client address and minute, entries of each waiting code, and failed entries server-wide. */
  readonly #entries: WindowLimit;
  readonly #codeEntries: WindowLimit;
  readonly #failedEntries: WindowLimit;
  /**
   * Until when (epoch ms) this process holds every address to DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING:
   * the server-wide wrong entries ran out (seen here at once, on other replicas at their next wrong entry).
   */
  #guessingUntil = 0;

  constructor(parts: SignInParts) {
    const { ctx } = parts;
    this.#parts = parts;
    this.#entries = new WindowLimit(ctx.store, ctx.clock, 'deviceentry', DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS);
    this.#codeEntries = new WindowLimit(ctx.store, ctx.clock, 'devicecode', DEVICE_ENTRIES_PER_MINUTE_PER_CODE);
    this.#failedEntries = new WindowLimit(ctx.store, ctx.clock, 'devicemiss', DEVICE_FAILED_ENTRIES_PER_MINUTE);
  }

  /** GET /device: the form for the code a device shows, prefilled from `verification_uri_complete`. */
  async page(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { signIn, ctx } = this.#parts;
    if (!signIn) throw SIGN_IN_OFF;
    const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
    const typed = query.get('user_code') ?? '';
    // Several providers: which one first; the code form then carries the choice.
    const choice = chooseProvider(signIn, query, res, `${ctx.publicUrl()}/device`);
    if (choice === undefined) return;
    writePage(res, 200, deviceCodePage({ action: `${ctx.publicUrl()}/device`, userCode: typed.slice(0, 20), ...choice }));
  }

  /**
   * POST /device: the code typed. Every entry counts towards its address's limit before a code is
   * looked up (past the server-wide bound on wrong entries, towards a lower one). A code that names a
   * pending device authorization counts towards that code's limit and shows the consent page (a
   * pending sign-in like one of /authorize, bounded alike); a wrong one counts server-wide.
   */
  async entry(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { ctx, signIn } = this.#parts;
    if (!signIn) throw SIGN_IN_OFF;
    // A cross-site POST would only spend the address's entries; refused early, as at the consent form.
    checkFormPost(req, ctx.publicUrl(), 'The code');
    const address = this.#parts.clientKey(req);
    const now = ctx.clock.now();
    const entered = await this.#entries.count(address);
    if (entered > DEVICE_ENTRIES_PER_MINUTE_PER_ADDRESS)
      throw tooManyRequests(this.#entries.secondsLeft(), 'too many device codes entered from this address; try again in a minute');
    if (now < this.#guessingUntil && entered > DEVICE_ENTRIES_PER_MINUTE_UNDER_GUESSING) {
      throw tooManyRequests(
        Math.ceil((this.#guessingUntil - now) / 1000),
        'too many wrong device codes were entered on this server; try again in a minute',
      );
    }
    const form = parseForm(req, await readBody(req, FORM_MAX_BODY_BYTES));
    const typed = form.get('user_code') ?? '';
    const choice = formChoice(signIn, form);
    if (choice === undefined) {
      // No provider (or one no longer configured) in the form: back to the chooser, the code kept.
      sendTo(res, new URL(`${ctx.publicUrl()}/device?${new URLSearchParams({ user_code: typed.slice(0, 20) })}`), 303);
      return;
    }
    const code = normaliseUserCode(typed);
    const codeHash = code === undefined ? undefined : hashToken(code);
    const found = codeHash === undefined ? null : await ctx.store.findDeviceAuthorization(codeHash);
    if (!found || found === 'corrupt' || found.status !== 'pending' || found.expiresAt <= now) {
      await this.#wrongCode(res, address, now, typed, form);
      return;
    }
    await this.#codeEntries.take(codeHash!, 'this code was entered too many times; try again in a minute');
    const looked = await this.#parts.clients.lookUp(found.clientId, req);
    if (!looked) throw new PageError(400, 'Unknown application', 'The application of this device was removed from this server.');
    const request: AuthorizationRequest = {
      clientId: found.clientId,
      redirectUri: '',
      codeChallenge: '',
      state: undefined,
      scope: found.scope,
      deviceCodeHash: found.deviceCodeHash,
      ...choice,
    };
    const browser = this.#parts.cookies.binding(req);
    const view = await awaitConsent(this.#parts, request, browser.value, address, looked);
    writePage(res, 200, consentPage(view), { 'set-cookie': browser.setCookie });
  }

  /**
   * A code that names no waiting device: counted server-wide (past the bound, every address is held to
   * a few entries for the rest of the minute), and the form again.
   */
  async #wrongCode(res: ServerResponse, address: string, now: number, typed: string, form: Form): Promise<void> {
    const { ctx } = this.#parts;
    const retryAfter = await this.#failedEntries.hit('all');
    if (retryAfter > 0) {
      if (now >= this.#guessingUntil)
        ctx.logger.warn({ address }, 'device-code entries held to a few per address for the rest of the minute: too many wrong codes');
      this.#guessingUntil = now + retryAfter * 1000;
    }
    ctx.logger.info({ address }, 'a device code was entered that names no waiting device');
    writePage(
      res,
      400,
      deviceCodePage({
        action: `${ctx.publicUrl()}/device`,
        userCode: typed.slice(0, 20),
        ...formChoice(this.#parts.signIn!, form),
        error: 'That code is not valid: it may be mistyped, expired or already used. Check the code on your device.',
      }),
    );
  }
}

/** The provider the code form carries (a name of the chooser's, and the e-mail that found it); undefined: none valid. */
function formChoice(signIn: IdpSignIn, form: Form): ProviderChoice | undefined {
  if (signIn.providers.length <= 1) return {};
  const provider = form.get('idp');
  if (provider === undefined || !signIn.providers.some((p) => p.name === provider)) return undefined;
  const hint = form.get('login_hint');
  return { provider, ...(hint !== undefined && hint !== '' && hint.length <= 320 ? { loginHint: hint } : {}) };
}
