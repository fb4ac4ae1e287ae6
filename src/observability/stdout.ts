// This process's stdout as the loggers write it: one staging buffer in front of sonic-boom, which
// every line to stdout goes through in order (pino's lines, the start-up lines, the access lines the
// proxy serialises straight into it: access-line.ts).

import fs from 'node:fs';
import { pino, type DestinationStream } from 'pino';

/** How much log output may wait in memory for a slow reader before lines are dropped. */
export const STDOUT_BUFFER_MAX_BYTES = 16 * 1024 * 1024;

/** Linux's PIPE_BUF: a write to a pipe of at most this many bytes is never interleaved with another's. */
export const ATOMIC_WRITE_BYTES = 4096;

/**
 * The most one write() to stdout carries when no other process shares it: four times sonic-boom's
 * default, so a busy proxy's access lines leave in a quarter of the writes (about 5 µs of CPU a
 * request less at 10,000 requests a second: docs/performance.md). LOG_FLUSH_INTERVAL_MS still bounds
 * how long a line waits.
 */
const STDOUT_WRITE_MAX_BYTES = 64 * 1024;

/** The longest a log line waits in memory before it is written, however quiet the process. */
export const LOG_FLUSH_INTERVAL_MS = 100;

const STDOUT_FD = 1;

/** On exit, how often (10 ms apart) a full pipe is tried again before the staged lines are given up. */
const EXIT_WRITE_TRIES = 100;

/**
 * stdout as pino writes it by default (sonic-boom, asynchronous: a request never waits for a log
 * write), with three differences.
 *
 * Lines are staged, then written in batches. Each line is copied into one buffer made once (no
 * string or buffer a line); once half a write's worth has gathered, on the LOG_FLUSH_INTERVAL_MS
 * timer, on flush and on exit, what is staged is handed to sonic-boom as one buffer. Each
 * asynchronous write is a hand-off to a libuv thread and back: one per line (an access line per
 * request) cost a busy proxy more than one context switch and a tenth to a fifth of its CPU per
 * request; one per batch costs a few a second.
 *
 * What waits for a slow or stuck reader (a full pipe) is bounded: past STDOUT_BUFFER_MAX_BYTES what
 * is handed over is dropped (a stage's worth of lines at a time) rather than the process growing
 * until it is OOM-killed. On exit the lines still staged are written synchronously after what
 * sonic-boom holds; only a hard kill loses lines, those of the last LOG_FLUSH_INTERVAL_MS at most.
 *
 * `shared`: several processes write to this stdout (worker processes inherit the primary's). Each
 * write() then carries whole lines and at most ATOMIC_WRITE_BYTES (the stage holds no more, and
 * sonic-boom cuts its buffer between the stages handed to it), so on a pipe, or a file opened for
 * appending, no two processes' lines mix within a line. Only a single line longer than that could
 * (an access log line is a few hundred bytes).
 */
export class StdoutStage implements DestinationStream {
  /** Lines not yet handed to sonic-boom: `bytes[0, used)`. Never more than one write's worth. */
  readonly bytes: Buffer;
  used = 0;
  readonly #half: number;
  readonly #stream: ReturnType<typeof pino.destination>;
  /** sonic-boom in buffer mode (its own type names only its string mode). */
  readonly #sink: { write(data: Buffer): boolean };
  /** Bytes handed to sonic-boom and not yet written (nor dropped). */
  #unwritten = 0;

  constructor(shared: boolean) {
    const maxWrite = shared ? ATOMIC_WRITE_BYTES : STDOUT_WRITE_MAX_BYTES;
    this.bytes = Buffer.allocUnsafeSlow(maxWrite);
    this.#half = maxWrite / 2;
    // Lines are handed over as bytes: sonic-boom then adds them to its batch in constant time (with
    // strings it measures the whole batch's UTF-8 length again at every hand-off).
    this.#stream = pino.destination({
      dest: STDOUT_FD,
      sync: false,
      maxLength: STDOUT_BUFFER_MAX_BYTES,
      maxWrite,
      minLength: this.#half,
      contentMode: 'buffer',
    });
    this.#sink = this.#stream as unknown as { write(data: Buffer): boolean };
    this.#stream.on('write', (bytes: number) => (this.#unwritten -= bytes));
    this.#stream.on('drop', (chunk: Buffer) => (this.#unwritten -= chunk.length));
    // While anything is staged or unwritten, each tick asks for a write. One asked for while another
    // is under way is not queued by sonic-boom, so the next tick asks again.
    setInterval(() => this.flush(), LOG_FLUSH_INTERVAL_MS).unref();
    // pino writes what sonic-boom holds on exit (flushSync, its own 'exit' listener): whichever of the
    // two listeners runs first, this one writes sonic-boom's lines, then the staged ones after them.
    process.on('exit', () => this.#writeOnExit());
  }

  /** A line (or several, whole) as pino and writeStdoutLines give it. */
  write(text: string): void {
    // At most three bytes a UTF-16 unit; the exact length only when that bound does not fit.
    const capacity = this.bytes.length;
    if (this.used + text.length * 3 > capacity) {
      const length = Buffer.byteLength(text);
      if (this.used + length > capacity) this.handOff();
      if (length > capacity) {
        this.#handOver(Buffer.from(text));
        return;
      }
    }
    this.staged(this.used + this.bytes.write(text, this.used));
  }

  /**
   * Makes room for a line of at most `bound` bytes at `used`: hands what is staged over first when
   * the line would not fit after it. False when no line that long fits in the stage at all.
   */
  room(bound: number): boolean {
    if (this.used + bound <= this.bytes.length) return true;
    this.handOff();
    return bound <= this.bytes.length;
  }

  /** Lines have been written into `bytes` up to `end`. */
  staged(end: number): void {
    this.used = end;
    if (end >= this.#half) this.handOff();
  }

  /** Hands what is staged to sonic-boom (a copy: the stage is reused at once). */
  handOff(): void {
    if (this.used === 0) return;
    const chunk = Buffer.from(this.bytes.subarray(0, this.used));
    this.used = 0;
    this.#handOver(chunk);
  }

  /** Hands what is staged over and asks sonic-boom to write what it holds. */
  flush(cb?: (err?: Error) => void): void {
    this.handOff();
    if (this.#unwritten > 0 || cb !== undefined) this.#stream.flush(cb);
  }

  #handOver(chunk: Buffer): void {
    this.#unwritten += chunk.length;
    this.#sink.write(chunk);
  }

  /**
   * Synchronously: what sonic-boom holds, then what is staged. Not handed to sonic-boom: that could
   * start an asynchronous write, which the exiting process would not wait for.
   */
  #writeOnExit(): void {
    if (this.used === 0) return;
    const staged = this.bytes.subarray(0, this.used);
    this.used = 0;
    try {
      this.#stream.flushSync();
      writeSyncAll(staged);
    } catch {
      // A closed stdout (EPIPE), or a reader stuck past the retries: the lines are lost, as they
      // would have been waiting for it.
    }
  }
}

/** All of `bytes` to stdout, waiting out a full non-blocking pipe (EAGAIN) a bounded number of times. */
function writeSyncAll(bytes: Buffer): void {
  let offset = 0;
  let tries = 0;
  while (offset < bytes.length) {
    try {
      offset += fs.writeSync(STDOUT_FD, bytes, offset);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || ++tries > EXIT_WRITE_TRIES) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
}

/** This process's stdout destination for loggers (see StdoutStage). */
export function stdoutDestination(shared: boolean): StdoutStage {
  if (batchedStdout?.shared !== shared) batchedStdout = { shared, destination: new StdoutStage(shared) };
  return batchedStdout.destination;
}

/** This process's staged stdout, shared by every logger made for stdout with the same `shared`. */
let batchedStdout: { shared: boolean; destination: StdoutStage } | undefined;

/**
 * Writes `text` (whole lines, not JSON: `proxy listening on ...`) to stdout after every log line
 * logged before it. A direct write to fd 1 would overtake the lines still waiting in the stage.
 */
export function writeStdoutLines(text: string): void {
  if (batchedStdout === undefined) process.stdout.write(text);
  else batchedStdout.destination.write(text);
}
