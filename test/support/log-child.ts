// A process that logs through the sidecar's real stdout destination (createLogger with no destination,
// JSON lines) and reports on stderr, as one JSON line, the write()s sonic-boom made to stdout: how many,
// the longest, and whether each ended a line. Started by test/integration/log-output.test.ts.
//
//   node log-child.ts lone               one line, then idle until killed
//   node log-child.ts burst <n> [shared] n lines, one a turn; the report once all n are written; exit 0
//   node log-child.ts exit <n>           n lines, then process.exit(0) in the same turn
//   node log-child.ts listening          a warning, then the start-up lines as main.ts writes them; idle

import fs from 'node:fs';
import { createLogger, writeStdoutLines } from '../../src/observability/logger.ts';

const [mode = 'lone', count = '1', shared] = process.argv.slice(2);
const expected = Number(count);
const writes: number[] = [];
let linesWritten = 0;
let lineEnds = true;

const note = (fd: unknown, data: unknown): void => {
  if (fd !== 1) return;
  const text = typeof data === 'string' ? data : Buffer.from(data as Uint8Array).toString();
  if (text.length === 0) return;
  writes.push(Buffer.byteLength(text));
  linesWritten += text.split('\n').length - 1;
  if (!text.endsWith('\n')) lineEnds = false;
};
const report = (): void => {
  process.stderr.write(`${JSON.stringify({ writes: writes.length, maxBytes: Math.max(0, ...writes), lineEnds })}\n`);
};
// sonic-boom calls fs.write and fs.writeSync through the module object at each write: counted here.
const write = fs.write as (...args: unknown[]) => void;
const writeSync = fs.writeSync as (...args: unknown[]) => number;
(fs as { write: unknown }).write = (fd: unknown, data: unknown, ...rest: unknown[]) => {
  note(fd, data);
  const done = rest.pop() as (err: Error | null, n: number) => void;
  write(fd, data, ...rest, (err: Error | null, n: number) => {
    done(err, n);
    if (mode === 'burst' && linesWritten >= expected) {
      report();
      process.exit(0);
    }
  });
};
(fs as { writeSync: unknown }).writeSync = (fd: unknown, data: unknown, ...rest: unknown[]) => {
  note(fd, data);
  return writeSync(fd, data, ...rest);
};

const logger = createLogger('info', undefined, 'json', shared === 'shared');
if (mode === 'lone') {
  logger.info({ n: 0 }, 'lone line');
  setInterval(() => undefined, 60_000);
} else if (mode === 'listening') {
  logger.warn('a start-up warning');
  writeStdoutLines('proxy listening on http://127.0.0.1:1\nadmin listening on http://127.0.0.1:2\n');
  setInterval(() => undefined, 60_000);
} else if (mode === 'exit') {
  for (let n = 0; n < expected; n++) logger.info({ n }, 'line');
  process.exit(0);
} else {
  // One line a turn of the event loop, as a proxy logs its requests.
  let n = 0;
  const next = (): void => {
    logger.info({ n, pad: 'x'.repeat(200) }, 'line');
    if (++n < expected) setImmediate(next);
  };
  next();
  // Alive until the last line is written (the flush timer does not hold a process open by itself).
  setInterval(() => undefined, 60_000);
}
