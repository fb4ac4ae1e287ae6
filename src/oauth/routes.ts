// OAuth routes on the proxy listener (the sidecar is the authorization server for /mcp).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, writeJson } from '../errors.ts';
import type { RouteHandler } from '../proxy/server.ts';
import { protectedResourceMetadata } from './metadata.ts';

export interface OAuthRouteDeps {
  publicUrl(): string;
}

export function createOAuthRoutes(deps: OAuthRouteDeps): RouteHandler {
  return (req: IncomingMessage, res: ServerResponse, path: string): boolean => {
    if (path === '/.well-known/oauth-protected-resource' || path === '/.well-known/oauth-protected-resource/mcp') {
      requireGet(req);
      writeJson(res, 200, protectedResourceMetadata(deps.publicUrl()), { 'cache-control': 'public, max-age=300' });
      return true;
    }
    return false;
  };
}

function requireGet(req: IncomingMessage): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    throw new HttpError(405, 'method_not_allowed', undefined, { headers: { allow: 'GET, HEAD' } });
  }
}
