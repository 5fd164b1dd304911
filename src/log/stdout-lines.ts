import { writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import type { DestinationStream } from 'pino';
import { readableLine } from './readable-line.js';

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Log lines written to stdout (fd 1) as they come, from either thread. A reader that is slow
 * (EAGAIN on a non-blocking pipe) is waited for; once stdout is gone (EIO after its terminal
 * closed, EPIPE after its reader quit) the lines are dropped. pino's own destination retries such
 * a line for ever when it flushes at exit, so a gateway whose terminal had closed never stopped.
 * JSON lines for journald, container runtimes and pipes; on a terminal, lines a person reads
 * (readable-line.ts), unless `json` says otherwise.
 */
export function stdoutLines(json = !isatty(1)): DestinationStream {
  let gone = false;
  return {
    write(line: string): void {
      let bytes = Buffer.from(json ? line : readableLine(line));
      while (!gone && bytes.length > 0) {
        try {
          bytes = bytes.subarray(writeSync(1, bytes));
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'EAGAIN') Atomics.wait(pause, 0, 0, 10);
          else gone = true;
        }
      }
    },
  };
}
