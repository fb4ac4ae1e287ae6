// Structured logs (pino). Secrets never reach a log line: the code logs no secret by construction, and
// these redaction paths are the net under it for anything that carries one by accident.

import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogLevel } from './config.ts';

export type { Logger };

export const REDACT_PATHS = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'callerToken',
  '*.callerToken',
  'clientSecret',
  '*.clientSecret',
  'client_secret',
  'accessToken',
  'access_token',
  'refresh_token',
  'refreshToken',
  'token',
  '*.token',
  'masterToken',
  'subject_token',
];

export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'mcp-bearer-proxy' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
