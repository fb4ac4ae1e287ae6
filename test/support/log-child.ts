// A process that logs through the sidecar's real stdout destination (createLogger with no destination,
// JSON lines) and reports on stderr, as one JSON line, the write()s sonic-boom made to stdout: how many,
// the longest, and whether each ended a line. Started by test/integration/log-output.test.ts.
//
//   node log-child.ts lone               one line, then idle until killed
//   node log-child.ts burst <n> [shared|own] [access]
//                                        n lines (access lines: access), one a turn; the report once
//                                        all n are written; exit 0
//   node log-child.ts exit <n>           n lines, then process.exit(0) in the same turn
//   node log-child.ts access             for each of ACCESS_CASES (the time pinned to PINNED_NOW), a
//                                        log line, its access line (and the same through a logger
//                                        at level warn), a start-up-style line; then
//                                        process.exit(0) in the same turn
//   node log-child.ts listening          a warning, then the start-up lines as main.ts writes them; idle
//   node log-child.ts big                a line longer than a write (100 KB), an access line longer than
//                                        the stage and a short one, then a start-up line; idle

import fs from 'node:fs';
import { accessLogger, createLogger, writeStdoutLines } from '../../src/observability/logger.ts';
import { ACCESS_CASES, PINNED_NOW } from './access-cases.ts';

const [mode = 'lone', count = '1', shared, kind] = process.argv.slice(2);
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
} else if (mode === 'big') {
  logger.info({ pad: 'x'.repeat(100_000) }, 'big line');
  // An access line longer than the stage, then one that fits.
  const access = accessLogger(logger);
  access.write({ ...ACCESS_CASES[0]!, path: `/${'y'.repeat(70_000)}` });
  access.write(ACCESS_CASES[0]!);
  writeStdoutLines('after the big line\n');
  setInterval(() => undefined, 60_000);
} else if (mode === 'exit') {
  for (let n = 0; n < expected; n++) logger.info({ n }, 'line');
  process.exit(0);
} else if (mode === 'access') {
  Date.now = () => PINNED_NOW;
  // Half through the logger itself, half through a child with bindings of its own (as a worker's).
  const access = [accessLogger(logger), accessLogger(logger.child({ worker: 1 }))];
  // A logger to the same stdout at a level above info: its access lines are never written.
  const quiet = accessLogger(createLogger('warn', undefined, 'json'));
  ACCESS_CASES.forEach((fields, n) => {
    logger.info({ n }, 'line');
    access[n % 2]!.write(fields);
    quiet.write(fields);
    writeStdoutLines(`plain ${n}\n`);
  });
  process.exit(0);
} else {
  // One line a turn of the event loop, as a proxy logs its requests.
  const access = accessLogger(logger);
  let n = 0;
  const next = (): void => {
    if (kind === 'access') access.write({ ...ACCESS_CASES[0]!, durationMs: n, subject: 'x'.repeat(200) });
    else logger.info({ n, pad: 'x'.repeat(200) }, 'line');
    if (++n < expected) setImmediate(next);
  };
  next();
  // Alive until the last line is written (the flush timer does not hold a process open by itself).
  setInterval(() => undefined, 60_000);
}
