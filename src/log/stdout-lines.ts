import { writeSync } from 'node:fs';
import type { DestinationStream } from 'pino';

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Log lines written to stdout (fd 1) as they come, from either thread. A reader that is slow
 * (EAGAIN on a non-blocking pipe) is waited for; once stdout is gone (EIO after its terminal
 * closed, EPIPE after its reader quit) the lines are dropped. pino's own destination retries such
 * a line for ever when it flushes at exit, so a gateway whose terminal had closed never stopped.
 */
export function stdoutLines(): DestinationStream {
  let gone = false;
  return {
    write(line: string): void {
      let bytes = Buffer.from(line);
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
