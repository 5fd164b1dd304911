import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { readableLine } from './readable-line.js';

/** What the logger writes for one call, as a terminal shows it. */
function shown(log: (logger: ReturnType<typeof createLogger>) => void): string {
  const lines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => void lines.push(readableLine(line)) });
  log(logger);
  return lines.join('');
}

describe('a log record on a terminal', () => {
  it('is its time and message alone at info: the start line reads as the README shows it', () => {
    const text = shown((l) =>
      l.info(
        { event: 'started', version: '1.2.3', tls: { fingerprintSha256: 'AB:CD' }, sinks: [{ name: 'questdb' }] },
        'Harbor Gateway 1.2.3: API …',
      ),
    );
    expect(text).toMatch(/^\d\d:\d\d:\d\d Harbor Gateway 1\.2\.3: API …\n$/);
  });

  it('names the level of a warning and keeps its fields, secrets redacted, and an error its stack', () => {
    const warning = shown((l) => l.warn({ event: 'sink_failed', sink: 'upstream', apiKey: 'secret' }, 'upstream unreachable'));
    expect(warning).toMatch(
      /^\d\d:\d\d:\d\d WARN upstream unreachable \{"event":"sink_failed","sink":"upstream","apiKey":"\[redacted\]"\}\n$/,
    );
    const error = shown((l) => l.error({ event: 'request_failed', err: new Error('boom') }, 'request failed'));
    expect(error).toMatch(
      /^\d\d:\d\d:\d\d ERROR request failed \{"event":"request_failed","err":\{"type":"Error","message":"boom"\}\}\nError: boom\n {4}at /,
    );
  });

  it('passes what is not a JSON record as it is', () => {
    expect(readableLine('plain text\n')).toBe('plain text\n');
  });
});
