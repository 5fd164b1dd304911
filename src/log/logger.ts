import pino, { type Logger, type LevelWithSilent } from 'pino';
import { stdoutLines } from './stdout-lines.js';

/** JSON lines on stdout (journald and container runtimes collect them), readable lines on a terminal; secrets are redacted by key. */
export function createLogger(level: LevelWithSilent, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'harbor-gateway' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'apiKey',
          'questdbPassword',
          '*.apiKey',
          '*.questdbPassword',
          'headers["x-api-key"]',
          '*.headers["x-api-key"]',
          'authorization',
          '*.authorization',
        ],
        censor: '[redacted]',
      },
    },
    destination ?? stdoutLines(),
  );
}
