// The client a sign-in is for: a registered one, or one described by its own metadata document (its
// id is the document's URL), fetched within the requesting address's share of fetches.

import type { IncomingMessage } from 'node:http';
import { HttpError } from '../../http/errors.ts';
import { DuplicateRecordError } from '../../store/types.ts';
import type { ClientRecord } from '../../model/records.ts';
import { isClientIdMetadataUrl, type ResolveOptions } from '../cimd.ts';
import { fetchAdmission, type OAuthContext } from '../context.ts';
import { PageError } from './errors.ts';

/** A client found for a sign-in; `stored`: it has a record (a document's client gets one at its first code). */
export interface SignInClient {
  client: ClientRecord;
  /** The host of its metadata document, shown on the consent page. */
  metadataHost?: string;
  stored: boolean;
}

export class SignInClients {
  readonly #ctx: OAuthContext;
  readonly #addressOf: (req: IncomingMessage) => string;
  /** Metadata-document fetches a client address may cause (cache hits are free), and their share of the slots. */
  readonly #documentFetches: (address: string) => ResolveOptions;

  constructor(ctx: OAuthContext, addressOf: (req: IncomingMessage) => string) {
    this.#ctx = ctx;
    this.#addressOf = addressOf;
    this.#documentFetches = fetchAdmission(ctx, 'too many application metadata documents fetched for this address; try again in a minute');
  }

  /**
   * A registered client, or one described by its own metadata document. A client an administrator
   * deleted stays refused, whatever its document says. A document that cannot be used: a PageError.
   */
  async lookUp(clientId: string, req: IncomingMessage): Promise<SignInClient | null> {
    if (clientId.length === 0 || clientId.length > 2048) return null;
    const stored = await this.#ctx.store.getClient(clientId);
    if (stored === 'corrupt') {
      this.#ctx.logger.warn({ clientId: clientId.slice(0, 200) }, 'client record unreadable: the request is refused');
      return null;
    }
    if (stored?.revokedAt !== undefined) return null;
    if (!this.#ctx.cimd || !isClientIdMetadataUrl(clientId)) return stored ? { client: stored, stored: true } : null;
    let doc;
    try {
      // Only a fetch that goes out counts towards the address's limit: a cached document is free.
      const address = this.#addressOf(req);
      doc = await this.#ctx.cimd.resolve(clientId, this.#documentFetches(address));
    } catch (err) {
      if (err instanceof HttpError && err.code === 'invalid_client') {
        throw new PageError(
          400,
          'Unknown application',
          `The application's metadata document cannot be used: ${err.description ?? 'it is not valid'}.`,
        );
      }
      throw err;
    }
    const client: ClientRecord = {
      clientId,
      redirectUris: doc.redirectUris,
      grantTypes: doc.grantTypes,
      profile: 'interactive',
      tokenEndpointAuthMethod: doc.tokenEndpointAuthMethod,
      source: 'cimd',
      createdAt: this.#ctx.clock.now(),
    };
    if (doc.clientName !== undefined) client.clientName = doc.clientName;
    if (doc.scope !== undefined) client.scope = doc.scope;
    return { client, metadataHost: doc.host, stored: stored !== null };
  }

  /**
   * A document's client gets a record when it is first issued a code (after the user approved and
   * signed in), so that its tokens can be issued, listed and revoked (deleteClient) like any other;
   * unused, it expires like a registration. Requests that stop at the consent page leave no record.
   */
  async remember(client: ClientRecord): Promise<void> {
    try {
      await this.#ctx.store.createClient(client);
    } catch (err) {
      if (!(err instanceof DuplicateRecordError)) throw err;
    }
    await this.#ctx.store.touchClient(client.clientId, this.#ctx.config.oauth.unusedClientTtlSeconds * 1000);
  }
}
