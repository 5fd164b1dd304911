import { execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';

describe('the unit project', () => {
  it('refuses a test that listens on a port', () => {
    expect(() => createServer().listen(0)).toThrow(/unit tests must not listen/);
  });

  it('refuses a test that starts a program such as a JVM', () => {
    expect(() => execFileSync('java', ['-version'])).toThrow(/unit tests must not start a process/);
  });
});
