// Loaded with `node --import` into a child process a test runs (e.g. the MCP conformance CLI): every
// outgoing socket it opens is written to the file named by LOOPBACK_ONLY_LOG (one JSON line each), and
// one to anything but a loopback address is refused before it connects, so a test can show the child
// reached nothing beyond this machine.

import { appendFileSync } from 'node:fs';
import { isIP, Socket } from 'node:net';

const logFile = process.env.LOOPBACK_ONLY_LOG;
if (!logFile) throw new Error('loopback-only: LOOPBACK_ONLY_LOG must name the file to record connections in');

interface Destination {
  host?: string;
  port?: number;
  path?: string;
}

/** Reads the forms Socket#connect takes: (options), (path), (port, host), or Node's pre-normalized array. */
function destinationOf(args: unknown[]): Destination {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (typeof first === 'string') return { path: first };
  if (typeof first === 'number') return { port: first, host: typeof args[1] === 'string' ? args[1] : 'localhost' };
  const options = (first ?? {}) as { host?: string; port?: number | string; path?: string };
  if (options.path !== undefined) return { path: options.path };
  return { host: options.host ?? 'localhost', port: Number(options.port) };
}

export function isLoopbackDestination(destination: Destination): boolean {
  // A Unix socket never leaves the machine.
  if (destination.path !== undefined) return true;
  const host = (destination.host ?? '').toLowerCase().replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host === '::1') return true;
  return isIP(host) === 4 && host.startsWith('127.');
}

const connect = Socket.prototype.connect;
Socket.prototype.connect = function (this: Socket, ...args: unknown[]) {
  const destination = destinationOf(args);
  const allowed = isLoopbackDestination(destination);
  appendFileSync(logFile, `${JSON.stringify({ ...destination, allowed })}\n`);
  if (!allowed) throw new Error(`loopback-only: refused a connection to ${destination.host}:${destination.port}`);
  return (connect as (...a: unknown[]) => Socket).apply(this, args);
} as typeof Socket.prototype.connect;
