// The HTTP boundary the listeners share: how a listener answers whatever its handlers throw, mapped in
// one place per listener (a refusal as it is, a store outage as 503, a bug as 500 with an error log).

import type { IncomingMessage, ServerResponse } from 'node:http';
import { httpErrorFor, writeError, type HttpError } from './errors.ts';
import { describe, type Logger } from './logger.ts';

export interface ErrorMapperOptions {
  logger: Logger;
  /** Names the listener in the log line of a bug. */
  listener: string;
  /** Called once for each request refused because the store is unavailable (for the metrics). */
  onStoreUnavailable(): void;
}

/** What a listener answers for an error; `path` is for the log line. */
export type ErrorMapper = (err: unknown, path: string) => HttpError;

/**
 * A listener's one error mapper. An HttpError is a decided answer and passes as it is; a store
 * outage is logged at warn and answered 503 (fail closed, retry later); anything else is a bug,
 * logged at error with its stack and answered 500, so it never passes for an outage.
 */
export function errorMapper(options: ErrorMapperOptions): ErrorMapper {
  const { logger, listener } = options;
  return (err, path) => {
    const answer = httpErrorFor(err);
    if (answer === err) return answer;
    if (answer.code === 'temporarily_unavailable') {
      options.onStoreUnavailable();
      logger.warn({ err: describe(err), listener, path }, 'store unavailable: answering 503 (fail closed)');
    } else {
      logger.error({ err: describe(err, true), listener, path }, `unexpected error on the ${listener} listener: answering 500`);
    }
    return answer;
  };
}

/** Writes an error answer; a request whose body was not read is answered, then its connection closed. */
export function answerError(req: IncomingMessage, res: ServerResponse, answer: HttpError): void {
  if (!req.complete && !res.headersSent) res.setHeader('connection', 'close');
  writeError(res, answer);
}

/** The path of a request target, without its query. */
export function pathOf(url: string | undefined): string {
  const target = url ?? '/';
  const q = target.indexOf('?');
  return q === -1 ? target : target.slice(0, q);
}
