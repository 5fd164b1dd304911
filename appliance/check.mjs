// npm run appliance:check — the part of the appliance that can be built from Debian's packages and
// the npm registry, built and run for arm64 under qemu-user emulation:
//   1. an arm64 root from Debian trixie packages (nodejs, libnode-dev), cached;
//   2. the gateway bundle and better-sqlite3 cross-compiled for arm64, staged in /opt/harbor-gateway
//      as harbor-gateway.service runs them;
//   3. first boot applied by the board's Node to a harbor.conf on a card tree that holds the units
//      and gateway.env of systemd/ as the image does: it generates the secrets and has the arm64
//      gateway check the settings (check-config);
//   4. the gateway started with the unit's command, the unit's environment, gateway.env and the
//      credentials its LoadCredential= lines name, as systemd would: a reading and a batch accepted
//      over HTTP, /status read, SIGTERM, and the readings found in queue.db afterwards.
// QuestDB is not started: the gateway must queue while it is away, which is what is checked.
// Runs as root (chroot; apt-get for missing host tools). Flags: --refresh (fetch the arm64 packages
// again), --keep (leave the work folder for a look).
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
  openSync,
  closeSync,
} from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { freePort } from '../scripts/lib/ports.mjs';
import { GATEWAY_ENV, GATEWAY_UNIT } from './board/firstboot.mjs';
import { parseEnvText } from './board/settings.mjs';
import { unitCommand, unitCredentials, unitEnvironment } from './board/unit.mjs';
import { applianceCache, ensureBinfmt, ensureHostPackages, repoRoot, requireRoot, run, stopwatch } from './lib/host.mjs';
import { GATEWAY_HOME, installSystemdFiles } from './lib/layout.mjs';
import { currentVersion } from './lib/release-source.mjs';
import { CROSS_TOOLS, stageGateway } from './lib/stage-gateway.mjs';
import { targetNode, unpackSysroot } from './lib/sysroot.mjs';

const flags = new Set(process.argv.slice(2));
const elapsed = stopwatch();
/** @type {string[]} */
const timings = [];
const step = (/** @type {string} */ name) => {
  timings.push(`${elapsed().toFixed(1).padStart(6)} s  ${name}`);
  process.stdout.write(`[appliance:check ${elapsed().toFixed(1)} s] ${name}\n`);
};

requireRoot('chroot into the arm64 root');
ensureHostPackages({
  'qemu-aarch64-static': 'qemu-user-static',
  'update-binfmts': 'binfmt-support',
  mmdebstrap: 'mmdebstrap',
  ...CROSS_TOOLS,
});
// First boot, itself under emulation, starts the arm64 gateway for its check.
ensureBinfmt();

mkdirSync(applianceCache(), { recursive: true });
// A work folder kept by an earlier run (failed, or --keep) has had its look.
for (const name of readdirSync(applianceCache()))
  if (name.startsWith('check-')) rmSync(join(applianceCache(), name), { recursive: true, force: true });
const work = mkdtempSync(join(applianceCache(), 'check-'));
const root = join(work, 'root');
let failed = true;
try {
  unpackSysroot(root, { refresh: flags.has('--refresh') });
  const node = targetNode(root);
  step(`arm64 root from Debian ${node.version} packages unpacked`);

  const release = currentVersion().version;
  await stageGateway({ sysroot: root, destination: join(root, GATEWAY_HOME), version: release });
  cpSync(join(repoRoot, 'appliance/board'), join(root, 'usr/lib/harbor-appliance'), { recursive: true });
  copyFileSync('/usr/bin/qemu-aarch64-static', join(root, 'usr/bin/qemu-aarch64-static'));
  step(`gateway bundle and arm64 better-sqlite3 staged in /${GATEWAY_HOME}`);

  const emulated = (/** @type {string[]} */ args, /** @type {Record<string, string>} */ env = {}) =>
    run('chroot', [root, '/usr/bin/qemu-aarch64-static', ...args], { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env }, quiet: true });

  const facts = JSON.parse(
    emulated([
      '/usr/bin/node',
      '-e',
      `const D=require('/${GATEWAY_HOME}/node_modules/better-sqlite3');` +
        "console.log(JSON.stringify({arch:process.arch,version:process.version,modules:process.versions.modules,sqlite:new D(':memory:').prepare('select sqlite_version() v').get().v}))",
    ]),
  );
  expect(facts.arch === 'arm64', `node reports arch ${facts.arch}`);
  expect(Number(facts.modules) === node.modules, `node ABI ${facts.modules}, module built for ${node.modules}`);
  step(`node ${facts.version} runs as ${facts.arch} (ABI ${facts.modules}) and loads better-sqlite3 (SQLite ${facts.sqlite})`);

  // First boot, by the board's Node, on a board tree inside the root.
  const board = join(root, 'board');
  mkdirSync(join(board, 'boot/firmware'), { recursive: true });
  mkdirSync(join(board, 'usr/share/zoneinfo'), { recursive: true });
  copyFileSync('/usr/share/zoneinfo/UTC', join(board, 'usr/share/zoneinfo/UTC'));
  mkdirSync(join(board, 'etc'), { recursive: true });
  writeFileSync(join(board, 'etc/machine-id'), 'a1b2c3d4e5f60718293a4b5c6d7e8f90\n');
  installSystemdFiles(board, { withGrafana: false });
  writeFileSync(join(board, 'boot/firmware/harbor.conf'), 'SITE_NAME=Emulated board\r\nHARBOR_ID=check\r\nTIMEZONE=UTC\r\n');
  emulated(['/usr/bin/node', '/usr/lib/harbor-appliance/firstboot.mjs', '--root', '/board']);
  expect(!existsSync(join(board, 'boot/firmware/harbor.conf')), 'harbor.conf is still on the boot partition');
  expect(existsSync(join(board, 'boot/firmware/harbor-credentials.txt')), 'no one-time credentials file');
  step('first boot applied harbor.conf, the gateway accepted the settings, the secrets were generated');

  // What systemd makes of harbor-gateway.service: the credentials its LoadCredential= lines name,
  // its Environment= overlaid by its EnvironmentFile, and its ExecStart.
  const unit = readFileSync(join(board, GATEWAY_UNIT), 'utf8');
  const credentials = join(board, 'run/credentials/harbor-gateway.service');
  mkdirSync(credentials, { recursive: true });
  // The forwarding sinks' secrets (by name, from /etc/credstore) exist only once given; systemd skips them.
  for (const { name, path } of unitCredentials(unit))
    if (existsSync(join(board, path))) copyFileSync(join(board, path), join(credentials, name));
  const apiKey = readFileSync(join(credentials, 'api_key'), 'utf8').trim();
  const env = { ...unitEnvironment(unit), ...parseEnvText(readFileSync(join(board, GATEWAY_ENV), 'utf8')) };
  expect(env['GATEWAY_ENV'] === 'production' && env['HARBOR_ID'] === 'check', `the unit and gateway.env give ${JSON.stringify(env)}`);
  const port = await freePort();
  const questdbPort = await freePort();
  const logPath = join(work, 'gateway.log');
  const log = openSync(logPath, 'w');
  const gateway = spawn('chroot', [root, '/usr/bin/qemu-aarch64-static', ...unitCommand(unit)], {
    env: {
      PATH: '/usr/sbin:/usr/bin:/sbin:/bin',
      ...env,
      CREDENTIALS_DIRECTORY: '/board/run/credentials/harbor-gateway.service',
      HOST: '127.0.0.1',
      PORT: String(port),
      HTTPS_PORT: String(await freePort()),
      QUESTDB_URL: `http://127.0.0.1:${questdbPort}`,
    },
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const exited = new Promise((resolve) => gateway.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitUntilReady(url, gateway, logPath);
    step(`gateway listening under emulation, production settings from first boot (${env['DATA_DIR']})`);

    const headers = { 'X-API-Key': apiKey, 'Content-Type': 'application/json' };
    // A minute ago: the gateway refuses readings older than its retention (docs/reading-times.md).
    const time = new Date(Date.now() - 60_000).toISOString();
    const single = await fetch(`${url}/api/v2/ingest/`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ time, ship_id: 'ship-arm64', cargo_id: 'temperature', value: 23.5 }),
    });
    expect(single.status === 200, `single push answered ${single.status}: ${await single.text()}`);
    const batch = await fetch(`${url}/api/v2/ingest/batch`, {
      method: 'POST',
      headers,
      body: JSON.stringify([
        { time, ship_id: 'ship-arm64', cargo_id: 'latitude', value: 53.5461 },
        { time, ship_id: 'ship-arm64', cargo_id: 'longitude', value: 9.9661 },
      ]),
    });
    expect(batch.status === 200, `batch push answered ${batch.status}: ${await batch.text()}`);
    const refused = await fetch(`${url}/api/v2/ingest/`, { method: 'POST', headers: { 'X-API-Key': 'harbor-dev-key' }, body: '{}' });
    expect(refused.status === 401, `the shipped test key got ${refused.status}, expected 401`);
    const status =
      /** @type {{ version: string, queue: { readings: number, maxBytes: number }, flush: { consecutiveFailures: number } }} */ (
        await (await fetch(`${url}/status`, { headers })).json()
      );
    expect(status.queue.readings === 3, `/status shows ${status.queue.readings} queued readings, expected 3`);
    expect(
      status.queue.maxBytes === Number(env['QUEUE_MAX_BYTES']),
      `queue bound ${status.queue.maxBytes} is not first boot's ${env['QUEUE_MAX_BYTES']}`,
    );
    expect(status.version === release, `/status reports version ${status.version}, the release is ${release}`);
    step(
      `3 readings accepted and queued while QuestDB is away (${status.flush.consecutiveFailures} failed flush attempts so far); /status names release ${release}`,
    );
  } finally {
    gateway.kill('SIGTERM');
  }
  const { code, signal } = /** @type {{ code: number | null, signal: string | null }} */ (
    await withTimeout(exited, 60_000, 'gateway did not stop on SIGTERM')
  );
  expect(code === 0, `gateway exited with ${code ?? signal} on SIGTERM:\n${tail(logPath)}`);
  step('gateway stopped on SIGTERM with exit status 0');

  const queue = new Database(join(root, String(env['DATA_DIR']), 'queue.db'), { readonly: true });
  try {
    // Records live in segment tables; nothing was flushed, so every segment is still unread.
    const segments = /** @type {string[]} */ (
      queue.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name GLOB 'segment_[0-9]*'").pluck().all()
    );
    const all = segments.map((name) => `SELECT readings, payload FROM ${name}`).join(' UNION ALL ');
    const row = /** @type {{ records: number, readings: number, ours: number }} */ (
      queue.prepare(`SELECT count(*) AS records, sum(readings) AS readings, sum(payload LIKE '%ship-arm64%') AS ours FROM (${all})`).get()
    );
    expect(
      row.records === 2 && row.readings === 3 && row.ours === 2,
      `queue.db holds ${JSON.stringify(row)}, expected 2 records with 3 readings`,
    );
  } finally {
    queue.close();
  }
  step('queue.db written on arm64 holds both records (3 readings) after the stop');

  // What a release hands another that cannot read its queue file (appliance/board/handover.mjs).
  const exported = JSON.parse(
    emulated([
      ...unitCommand(unit).slice(0, -1),
      'queue',
      'export',
      join('/', String(env['DATA_DIR']), 'queue.db'),
      '--out',
      '/board/readings.ndjson',
    ]),
  );
  const lines = readFileSync(join(board, 'readings.ndjson'), 'utf8').trim().split('\n');
  expect(
    exported.readings === 3 && lines.length === exported.batches && lines.every((line) => JSON.parse(line).body.includes('ship-arm64')),
    `queue export wrote ${JSON.stringify(exported)}: ${lines.join(' | ')}`,
  );
  step('the arm64 gateway exports the queued readings as ingest batches, for a release that cannot read the file');
  failed = false;
} finally {
  process.stdout.write(`\nappliance:check ${failed ? 'FAILED' : 'passed'} in ${elapsed().toFixed(1)} s\n${timings.join('\n')}\n`);
  if (flags.has('--keep') || failed) process.stdout.write(`work folder kept: ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
}

function expect(/** @type {boolean} */ condition, /** @type {string} */ message) {
  if (!condition) throw new Error(message);
}

function tail(/** @type {string} */ path) {
  return existsSync(path) ? readFileSync(path, 'utf8').slice(-3000) : '';
}

/**
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {string} message
 * @returns {Promise<T>}
 */
function withTimeout(promise, ms, message) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return /** @type {Promise<T>} */ (Promise.race([promise, timeout]).finally(() => clearTimeout(timer)));
}

/** Polls /readyz: the first start under emulation takes seconds (V8 on qemu). */
async function waitUntilReady(
  /** @type {string} */ url,
  /** @type {import('node:child_process').ChildProcess} */ child,
  /** @type {string} */ logPath,
) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`gateway exited during start:\n${tail(logPath)}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`gateway not ready within 120 s:\n${tail(logPath)}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
