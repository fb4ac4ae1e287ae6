// Ports for servers that cannot bind port 0 and say which they got (nginx, Caddy, redis-server): picked
// below the OS's ephemeral range, where the OS never hands a port out on its own. A port taken from
// that range and closed again could be given to any socket of a busy machine (an outgoing connection
// of another test, say) before the server binds it: the server then fails to bind while the test talks
// to whoever holds the port.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** Where the OS's ephemeral ports begin (Linux: /proc; elsewhere IANA's 49152). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 2048) return low;
  } catch {
    // Not Linux.
  }
  return 49152;
}

const LOW = 20_000;

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A port on 127.0.0.1 that was free a moment ago and that the OS will not hand out by itself. */
export async function freePort(): Promise<number> {
  const high = ephemeralLow();
  const span = Math.max(1, high - LOW);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOW + Math.floor(Math.random() * span);
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port between ${LOW} and ${high} after 200 tries`);
}
