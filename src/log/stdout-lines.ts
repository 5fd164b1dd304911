import { fstatSync, writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import { isMainThread } from 'node:worker_threads';
import type { DestinationStream } from 'pino';
import { readableLine } from './readable-line.js';

/** Log bytes held at most while stdout's reader is slow; past it, lines are dropped and counted. */
export const MAX_HELD_BYTES = 1024 * 1024;
/** How soon a held line is tried again. */
const RETRY_MS = 10;
/** How long the held lines are waited for when the process exits. */
const EXIT_WAIT_MS = 2000;
/** How long the rest of a line written in part is waited for before it is held like the others. */
const LINE_END_WAIT_MS = 100;

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Log lines written to stdout (fd 1) as they come, from either thread, never waiting for its reader.
 * A line the reader cannot take yet (a full pipe or socket: EAGAIN) is held, with those after it,
 * and written as the reader takes them; past MAX_HELD_BYTES lines are dropped, and a line says how
 * many once the reader caught up. A request never waits behind a slow journal. At exit, what is
 * held is waited for up to 2 s. Once stdout is gone (EIO after its terminal closed, EPIPE after its
 * reader quit) the lines are dropped: pino's own destination retries such a line for ever when it
 * flushes at exit, so a gateway whose terminal had closed never stopped.
 * JSON lines for journald, container runtimes and pipes; on a terminal, lines a person reads
 * (readable-line.ts), unless `json` says otherwise.
 */
export function stdoutLines(json = !isatty(1), fd = 1): DestinationStream {
  // Node opens a pipe or socket on stdout without blocking (libuv); a write then says EAGAIN
  // rather than wait for the reader. Another thread finds the descriptor so already.
  if (fd === 1 && isMainThread && isPipeOrSocket(fd)) void process.stdout;
  const format = (line: string): Buffer => Buffer.from(json ? line : readableLine(line));
  const held: Buffer[] = [];
  let heldBytes = 0;
  let dropped = 0;
  let gone = false;

  /** Writes the rest of the first held line, begun already, waiting a little for the reader. */
  const endLine = (): void => {
    const deadline = Date.now() + LINE_END_WAIT_MS;
    let rest = held[0] as Buffer;
    while (rest.length > 0 && Date.now() < deadline) {
      Atomics.wait(pause, 0, 0, 1);
      try {
        const written = writeSync(fd, rest);
        heldBytes -= written;
        rest = rest.subarray(written);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return;
      }
    }
    if (rest.length === 0) held.shift();
    else held[0] = rest;
  };
  /** Writes what is held until the reader is full; true when nothing is held any more. */
  const writeHeld = (): boolean => {
    while (held.length > 0 && !gone) {
      const first = held[0] as Buffer;
      try {
        const written = writeSync(fd, first);
        heldBytes -= written;
        if (written === first.length) held.shift();
        else {
          held[0] = first.subarray(written);
          // Both threads write to fd 1: the other's next line must not land inside this one's.
          if (written > 0) endLine();
        }
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return false;
        gone = true;
      }
    }
    if (gone) {
      held.length = 0;
      heldBytes = 0;
    }
    return true;
  };
  const hold = (bytes: Buffer): void => {
    held.push(bytes);
    heldBytes += bytes.length;
  };
  // Runs while anything is held: a write holds behind what is held rather than start another.
  const drain = (): void => {
    if (writeHeld() && dropped > 0) {
      hold(format(droppedLine(dropped)));
      dropped = 0;
      writeHeld();
    }
    if (held.length > 0) setTimeout(drain, RETRY_MS).unref();
    else process.off('exit', atExit);
  };
  const atExit = (): void => {
    const deadline = Date.now() + EXIT_WAIT_MS;
    if (dropped > 0) {
      hold(format(droppedLine(dropped)));
      dropped = 0;
    }
    while (!writeHeld() && Date.now() < deadline) Atomics.wait(pause, 0, 0, RETRY_MS);
  };
  return {
    write(line: string): void {
      if (gone) return;
      const bytes = format(line);
      if (held.length > 0) {
        if (heldBytes + bytes.length > MAX_HELD_BYTES) dropped += 1;
        else hold(bytes);
        return;
      }
      hold(bytes);
      if (writeHeld()) return;
      setTimeout(drain, RETRY_MS).unref();
      process.once('exit', atExit);
    },
  };
}

function isPipeOrSocket(fd: number): boolean {
  try {
    const stat = fstatSync(fd);
    return stat.isFIFO() || stat.isSocket();
  } catch {
    return false;
  }
}

const droppedLine = (count: number): string =>
  `${JSON.stringify({
    level: 40,
    time: Date.now(),
    event: 'log_lines_dropped',
    dropped: count,
    msg: `${count} log lines were dropped: stdout's reader fell more than ${MAX_HELD_BYTES / 1024} KiB behind`,
  })}\n`;
