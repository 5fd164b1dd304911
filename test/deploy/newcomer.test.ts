// A newcomer's first hour, as the README tells it: a clean clone, `npm ci`, `npm run local`, the
// README's commands and examples as written (taken from the README, so this fails when it drifts),
// then every way a person stops it: SIGTERM to npm, closing the terminal, SIGHUP to npm. Each time
// nothing of it may be left running: no process, no port.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import type { NpmCiOutcome } from '../support/newcomer-clone.js';
import { newcomerEnv } from '../support/newcomer-env.js';
import { waitUntil } from '../support/wait.js';

const root = join(import.meta.dirname, '..', '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
/** A clean clone of the repository, made with the run (test/support/newcomer-clone.ts). */
const clone = inject('newcomerClone');

/** The README's `sh` blocks, in order. */
const shellBlocks = [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
/** The command lines the README shows beside `npm run local`, comments dropped. */
const cliCommands = shellBlocks
  .flatMap((block) => block.split('\n'))
  .filter((line) => line.startsWith('node dist/gateway.mjs '))
  .map((line) => line.replace(/\s+#.*$/, ''));
/** The README's examples: each `sh` block that posts with curl. */
const curlExamples = shellBlocks.filter((block) => block.startsWith('curl '));

/** Pids of every process started from the clone: npm, the script, the gateway, QuestDB. */
function processesOfClone(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${entry}/stat`, 'utf8'))) continue;
      if (cmdline.includes(clone) || readlinkSync(`/proc/${entry}/cwd`).startsWith(clone)) pids.push(Number(entry));
    } catch {
      /* gone meanwhile */
    }
  }
  return pids;
}

const listening = (port: number, host = '127.0.0.1'): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect(port, host, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });

interface Run {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the child's exit status once it has exited and all it wrote has been read. */
  closed: Promise<number | null>;
  /** The gateway's plain and HTTPS ports, QuestDB's HTTP port, and the start line. */
  port: number;
  httpsPort: number;
  questdbPort: number;
  questdbPgPort: number;
  startLine: string;
}

/** Starts `command` in the clone and waits for the gateway's start line. */
async function startLocal(command: string, args: string[]): Promise<Run> {
  const child = spawn(command, args, { cwd: clone, env: newcomerEnv(), detached: true });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  // Piped, the start line is a JSON record; on a terminal (script(1)), the plain message.
  const startLine = (): string | undefined =>
    /^.*"event":"started".*$/m.exec(output)?.[0] ?? /^.*Harbor Gateway .* X-API-Key .*$/m.exec(output)?.[0];
  await waitUntil(
    'the gateway to start',
    () => startLine() !== undefined || child.exitCode !== null,
    240_000,
    () => output.slice(-2000),
  );
  const line = startLine();
  if (line === undefined) throw new Error(`npm run local ended before the gateway started:\n${output.slice(-2000)}`);
  const message = line.includes('"event":"started"') ? (JSON.parse(line.replace(/^[^{]*/, '')) as { msg: string }).msg : line;
  const api = /API http:\/\/127\.0\.0\.1:(\d+)\/api\/v2\/ingest and https:\/\/127\.0\.0\.1:(\d+)\//.exec(message)!;
  const questdb = /QuestDB: http:\/\/127\.0\.0\.1:(\d+) \(PostgreSQL wire on 127\.0\.0\.1:(\d+)/.exec(output)!;
  return {
    child,
    output: () => output,
    closed,
    port: Number(api[1]),
    httpsPort: Number(api[2]),
    questdbPort: Number(questdb[1]),
    questdbPgPort: Number(questdb[2]),
    startLine: message,
  };
}

/** Waits until nothing of the run is left: no process from the clone, none of its ports open. */
async function expectNothingLeft(run: Run): Promise<void> {
  await run.closed;
  await waitUntil(`every process of the run to end: ${processesOfClone().join(', ')}`, () => processesOfClone().length === 0, 60_000);
  for (const port of [run.port, run.httpsPort, run.questdbPort, run.questdbPgPort]) expect(await listening(port), String(port)).toBe(false);
  // The gateway stopped in order and closed its queue: SQLite removes the WAL file then, and
  // leaves it behind after a forced exit (a second signal) or a kill.
  expect(existsSync(join(clone, 'data', 'queue.db-wal')), `a stop in order:\n${run.output()}`).toBe(false);
}

async function questdbCount(run: Run, where: string): Promise<number> {
  const query = encodeURIComponent(`SELECT count() FROM cargo_data WHERE ${where}`);
  const answer = (await (await fetch(`http://127.0.0.1:${run.questdbPort}/exec?query=${query}`)).json()) as { dataset: [[number]] };
  return answer.dataset[0][0];
}

const sh = (script: string, port: number) =>
  spawnSync('sh', ['-c', script.replaceAll('localhost:8000', `localhost:${port}`)], { cwd: clone, env: newcomerEnv(), encoding: 'utf8' });

// The clone's `npm ci` started with the run, at the lowest priority; this project runs last.
beforeAll(async () => {
  const outcomeFile = inject('newcomerNpmCi');
  // Still running (this file run alone, or a busy machine): the priority of the rest from now on
  // (taking back a nice value needs root; without it the compile goes on at the lowest priority).
  if (!existsSync(outcomeFile)) spawnSync('renice', ['-n', '0', '-g', String(inject('newcomerNpmCiGroup'))], { stdio: 'ignore' });
  await waitUntil('npm ci in the clean clone to end', () => existsSync(outcomeFile), 1_200_000);
  const outcome = JSON.parse(readFileSync(outcomeFile, 'utf8')) as NpmCiOutcome;
  expect(outcome.status, `npm ci (${outcome.signal ?? 'no signal'}):\n${outcome.output}`).toBe(0);
  process.stdout.write(`npm ci in a clean clone: ${outcome.seconds.toFixed(0)} s, beside the other tests at the lowest priority\n`);
}, 1_200_000);

// A test that failed half way leaves its run behind; the next would meet its ports and files.
afterEach(() => {
  for (const pid of processesOfClone()) process.kill(pid, 'SIGKILL');
});

describe.sequential("the README's first hour in a clean clone", () => {
  it('the README shows the commands and examples this test runs', () => {
    expect(cliCommands).toEqual(expect.arrayContaining([expect.stringMatching(/^node dist\/gateway\.mjs keys add buoy-3$/)]));
    expect(cliCommands.some((c) => c.includes('tls-certificate'))).toBe(true);
    expect(cliCommands.some((c) => c.includes('dead-letters list'))).toBe(true);
    expect(curlExamples.map((block) => /\/api\/v2\/ingest\/?[a-z]*/.exec(block)![0])).toEqual([
      '/api/v2/ingest/',
      '/api/v2/ingest/gps',
      '/api/v2/ingest/ttn',
    ]);
  });

  it('npm run local refuses to listen beyond this machine with the public development key or an empty one', () => {
    for (const key of [{}, { API_KEY: '' }, { API_KEY: 'harbor-dev-key' }]) {
      const result = spawnSync('node', ['scripts/run-local.mjs'], {
        cwd: clone,
        env: { ...newcomerEnv(), HOST: '0.0.0.0', ...key },
        encoding: 'utf8',
      });
      expect(result.status, JSON.stringify(key)).toBe(78);
      expect(result.stderr).toContain('HOST=0.0.0.0 API_KEY=$(openssl rand -hex 24) npm run local');
    }
    expect(processesOfClone()).toEqual([]);
  });

  it('npm run local on loopback, with 8443 taken; the commands and examples as written; SIGTERM to npm stops everything', async () => {
    // Port 8443 taken, by this test or by whoever holds it already: the gateway falls back.
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => {
      blocker.once('error', () => resolve());
      blocker.listen(8443, '127.0.0.1', () => resolve());
    });
    mkdirSync(join(clone, 'data', 'gateway'), { recursive: true });
    const run = await startLocal('npm', ['run', 'local']);
    try {
      blocker.close();
      expect(run.output()).toContain(`port 8443 is taken: HTTPS_PORT=${run.httpsPort} instead`);
      expect(run.output()).toContain('data/gateway is from an earlier `npm run local` and is no longer used');
      expect(run.startLine).toContain(
        `API http://127.0.0.1:${run.port}/api/v2/ingest and https://127.0.0.1:${run.httpsPort}/api/v2/ingest;`,
      );
      expect(run.startLine).toContain(`queue ${join(clone, 'data', 'queue.db')}`);
      expect(run.startLine).toContain('X-API-Key harbor-dev-key, the public development key');
      // Loopback only: the machine's other addresses refuse.
      const lan = Object.values(networkInterfaces())
        .flat()
        .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal);
      if (lan !== undefined) expect(await listening(run.port, lan.address)).toBe(false);

      // The README's commands, as written, beside the running gateway.
      const outputs = new Map<string, string>();
      const sendWith = async (key: string): Promise<number> =>
        (
          await fetch(`http://127.0.0.1:${run.port}/api/v2/ingest`, {
            method: 'POST',
            headers: { 'x-api-key': key },
            body: JSON.stringify({ ship_id: 'buoy-3', cargo_id: 'temperature', value: 12.5 }),
          })
        ).status;
      let buoyKey = '';
      for (const command of cliCommands) {
        const result = sh(command, run.port);
        expect(result.status, `${command}: ${result.stderr}`).toBe(0);
        outputs.set(command.split(' ').slice(2, 4).join(' '), result.stdout);
        if (command.endsWith('keys add buoy-3')) {
          buoyKey = result.stdout.trim();
          // The running gateway takes the key the command wrote (it notices the file within 2 s).
          await waitUntil('the new key to be taken', async () => (await sendWith(buoyKey)) === 200);
        }
      }
      // The last command revoked it.
      await waitUntil('the revoked key to be refused', async () => (await sendWith(buoyKey)) === 401);
      expect(outputs.get('keys list')).toContain('buoy-3');
      const fingerprint = /([0-9A-F]{2}:){31}[0-9A-F]{2}/.exec(outputs.get('tls-certificate --fingerprint') ?? '')?.[0];
      expect(run.startLine).toContain(`HTTPS certificate SHA-256 ${fingerprint} (self-signed)`);
      expect(outputs.get('dead-letters list')).not.toMatch(/no queue/i);

      // The README's examples, as written, on the port the gateway took.
      for (const example of curlExamples) {
        const result = sh(`curl() { command curl -sS -w '\\n%{http_code}\\n' "$@"; }\n${example}`, run.port);
        expect(result.status, result.stderr).toBe(0);
        const statuses = result.stdout.split('\n').filter((line) => /^\d{3}$/.test(line));
        expect(statuses.length, result.stdout).toBeGreaterThan(0);
        expect(new Set(statuses), result.stdout).toEqual(new Set(['200']));
      }
      // Stored, and within the dashboard's default range of the last 6 hours.
      const recent = "time > dateadd('h', -6, now())";
      // Each example's readings may reach QuestDB in a delivery of their own.
      const stored = async () =>
        [
          await questdbCount(run, `ship_id = 'ship-001' AND ${recent}`),
          await questdbCount(run, `ship_id = 'tug-7' AND ${recent}`),
          await questdbCount(run, `ship_id = 'soil-sensor-1' AND ${recent}`),
        ].join(' ');
      let counts = '';
      await waitUntil(
        'the readings of the examples in QuestDB: 3 of ship-001, 4 of tug-7, 9 of soil-sensor-1',
        async () => {
          counts = await stored();
          return counts === '3 4 9';
        },
        20_000,
        () => `stored: ${counts}`,
      );
    } finally {
      process.kill(run.child.pid!, 'SIGTERM');
    }
    await expectNothingLeft(run);
    expect(run.output()).toContain('stopping (SIGTERM)');
    expect(run.output()).toContain('"event":"stopped"');
  }, 300_000);

  it('closing the terminal of npm run local stops everything, and loses no reading', async () => {
    // script(1) is the terminal; killing it is closing the window.
    const run = await startLocal('script', ['-qfec', 'npm run local', '/dev/null']);
    // On a terminal the start line is plain words with the time before them, as the README shows it.
    expect(run.startLine).toMatch(/^\d\d:\d\d:\d\d Harbor Gateway .* X-API-Key harbor-dev-key/);
    expect(run.output()).not.toContain('"event":"started"');
    const answer = await fetch(`http://127.0.0.1:${run.port}/api/v2/ingest`, {
      method: 'POST',
      headers: { 'x-api-key': 'harbor-dev-key' },
      body: JSON.stringify({ ship_id: 'closed-terminal', cargo_id: 'c', value: 1 }),
    });
    expect(answer.status).toBe(200);
    process.kill(run.child.pid!, 'SIGKILL');
    await expectNothingLeft(run);
  }, 300_000);

  it('Ctrl-C typed in the terminal stops everything, the gateway in order', async () => {
    const run = await startLocal('script', ['-qfec', 'npm run local', '/dev/null']);
    // The terminal turns ^C into SIGINT for every process in its foreground group.
    run.child.stdin!.write('\x03');
    await expectNothingLeft(run);
    expect(run.output()).toContain('stopping (SIGINT)');
  }, 300_000);

  it('SIGHUP to npm alone stops everything, and the reading of the closed terminal is in QuestDB', async () => {
    const run = await startLocal('npm', ['run', 'local']);
    try {
      // Sent just before the terminal closed: delivered then, or from the queue now.
      await waitUntil(
        'the reading of the closed terminal in QuestDB',
        async () => (await questdbCount(run, "ship_id = 'closed-terminal'")) === 1,
      );
    } finally {
      process.kill(run.child.pid!, 'SIGHUP');
    }
    await expectNothingLeft(run);
    expect(run.output()).toContain('stopping (its parent process ended)');
  }, 300_000);
});
