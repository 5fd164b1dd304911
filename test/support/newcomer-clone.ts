import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { newcomerEnv } from './newcomer-env.js';

declare module 'vitest' {
  export interface ProvidedContext {
    newcomerClone: string;
    /** A JSON file written once the clone's `npm ci` has ended: `NpmCiOutcome`. */
    newcomerNpmCi: string;
    /** The process group of the clone's `npm ci`. */
    newcomerNpmCiGroup: number;
  }
}

export interface NpmCiOutcome {
  status: number | null;
  signal: string | null;
  seconds: number;
  /** The end of what it printed. */
  output: string;
}

let dir: string | undefined;
let npmCi: ChildProcess | undefined;
let ended: Promise<void> = Promise.resolve();

/**
 * A clean clone of the repository and its `npm ci`, started with the run (after global-setup.ts,
 * so in the run's temporary directory): the compile of better-sqlite3 it does takes a core for a
 * minute or more, and at the lowest priority it takes the time the other tests leave idle. The
 * newcomer project runs last and waits for its outcome.
 */
export function setup(project: TestProject): void {
  const root = join(import.meta.dirname, '..', '..');
  dir = mkdtempSync(join(tmpdir(), 'harbor-newcomer-'));
  const clone = join(dir, 'harbor-gateway');
  const outcome = join(dir, 'npm-ci.json');
  execFileSync('git', ['clone', '--quiet', root, clone]);
  const started = Date.now();
  let output = '';
  const child = spawn('nice', ['-n', '19', 'npm', 'ci', '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: clone,
    env: newcomerEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  npmCi = child;
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-8000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  ended = new Promise((resolve) => {
    const write = (status: number | null, signal: string | null) => {
      if (npmCi === undefined) return;
      const result: NpmCiOutcome = { status, signal, seconds: (Date.now() - started) / 1000, output };
      writeFileSync(outcome, JSON.stringify(result));
      npmCi = undefined;
      resolve();
    };
    child.once('error', (error) => write(null, String(error)));
    child.once('close', write);
  });
  project.provide('newcomerClone', clone);
  project.provide('newcomerNpmCi', outcome);
  project.provide('newcomerNpmCiGroup', child.pid ?? 0);
}

/** Stops an `npm ci` still running (a run cut short) and removes the clone. */
export async function teardown(): Promise<void> {
  if (npmCi?.pid !== undefined) process.kill(-npmCi.pid, 'SIGKILL');
  await ended;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
}
