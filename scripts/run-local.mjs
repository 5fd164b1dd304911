// Runs the gateway with a local QuestDB on this machine: `npm run local` (which builds first).
//
// - The gateway keeps its queue, device keys and certificate in ./data, where the command line
//   looks by default, so `node dist/gateway.mjs keys add …` run from the project finds them.
//   QuestDB keeps its data in ./data/questdb.
// - It listens on loopback only: the development key `harbor-dev-key` is public. HOST opens it to
//   the LAN, and then API_KEY must be a key of your own.
// - Ports 8000 and 8443 (the gateway) and 9000 and 8812 (QuestDB) are used when free, else free
//   ones; PORT and HTTPS_PORT, when set, are used as they are.
// - It prints the console's address and a password made for the run (CONSOLE_PASSWORD chooses one).
// - Ctrl-C, SIGTERM (to npm or to this process), SIGHUP (the terminal closed) and npm going away
//   all stop both: the gateway first, so its last flush reaches QuestDB, then QuestDB.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { consoleUrl } from './lib/console-url.mjs';
import { GATEWAY_GLIBC_TUNABLES, GATEWAY_NODE_OPTIONS } from './lib/node-options.mjs';
import { freePort } from './lib/ports.mjs';
import { projectRoot } from './lib/paths.mjs';
import { QUESTDB_VERSION, startQuestDb } from './lib/questdb.mjs';

const DEVELOPMENT_KEY = 'harbor-dev-key';

/** Lines for the person at the terminal; a terminal that closed is no reason to stop differently. */
const say = (/** @type {string} */ text) => process.stdout.write(`${text}\n`);
process.stdout.on('error', () => undefined);

/** The preferred port when it is free on `host`, otherwise any free one. */
const portOr = (/** @type {number} */ preferred, /** @type {string} */ host) =>
  /** @type {Promise<number>} */ (
    new Promise((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(freePort()));
      probe.listen(preferred, host, () => probe.close(() => resolve(preferred)));
    })
  );

const isLoopback = (/** @type {string} */ host) => host === 'localhost' || host === '::1' || host.startsWith('127.');

const host = process.env.HOST ?? '127.0.0.1';
// An empty API_KEY is no key of one's own (the gateway refuses it too, beyond loopback).
const ownKey = Boolean(process.env.API_KEY_FILE) || (Boolean(process.env.API_KEY) && process.env.API_KEY !== DEVELOPMENT_KEY);
if (!isLoopback(host) && !ownKey) {
  process.stderr.write(
    `HOST=${host} opens the gateway to the network, where the development key ${DEVELOPMENT_KEY} is no secret.\n` +
      'Give it a key of your own, e.g.: HOST=0.0.0.0 API_KEY=$(openssl rand -hex 24) npm run local\n',
  );
  process.exit(78);
}

let stopRequested = '';
/** @type {import('node:child_process').ChildProcess | undefined} */
let gateway;
const stop = (/** @type {string} */ why) => {
  if (stopRequested !== '') return;
  stopRequested = why;
  say(`stopping (${why})...`);
  // The gateway runs in a process group of its own, so this is the one signal it gets.
  gateway?.kill('SIGTERM');
};
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) process.on(signal, () => stop(signal));
// npm does not pass SIGHUP on: when it goes away, this process is handed to another parent.
const parent = process.ppid;
setInterval(() => process.ppid !== parent && stop('its parent process ended'), 500).unref();

const dataDir = join(projectRoot, 'data');
if (existsSync(join(dataDir, 'gateway'))) {
  say('data/gateway is from an earlier `npm run local` and is no longer used: the queue, keys and certificate are in data/ now.');
}
const port = process.env.PORT ?? String(await portOr(8000, host));
const httpsPort = process.env.HTTPS_PORT ?? String(await portOr(8443, host));
if (port !== '8000' && process.env.PORT === undefined) say(`port 8000 is taken: PORT=${port} instead`);
if (httpsPort !== '8443' && process.env.HTTPS_PORT === undefined) say(`port 8443 is taken: HTTPS_PORT=${httpsPort} instead`);

say(`starting QuestDB ${QUESTDB_VERSION} (the first run downloads it from Maven Central)...`);
const questdb = await startQuestDb({
  dataDir: join(dataDir, 'questdb'),
  httpPort: await portOr(9000, '127.0.0.1'),
  pgPort: await portOr(8812, '127.0.0.1'),
}).catch((/** @type {Error} */ error) => {
  // Ctrl-C reaches QuestDB too, and may stop it before it answered.
  if (stopRequested === '') throw error;
  process.exit(0);
});
say(`QuestDB: ${questdb.httpUrl} (PostgreSQL wire on 127.0.0.1:${questdb.pgPort}, user admin, password quest)`);
if (stopRequested !== '') {
  await questdb.stop();
  process.exit(0);
}

// The console's password: yours when CONSOLE_PASSWORD is set, else a new one for this run.
process.env.CONSOLE_PASSWORD ||= randomBytes(12).toString('base64url');
gateway = spawn(process.execPath, [join(projectRoot, 'dist', 'gateway.mjs')], {
  stdio: 'inherit',
  detached: true,
  env: {
    NODE_OPTIONS: GATEWAY_NODE_OPTIONS,
    GLIBC_TUNABLES: GATEWAY_GLIBC_TUNABLES,
    DATA_DIR: dataDir,
    QUESTDB_URL: questdb.httpUrl,
    ...process.env,
    HOST: host,
    PORT: port,
    HTTPS_PORT: httpsPort,
  },
});
say(`console: ${consoleUrl(host, httpsPort)} (self-signed certificate), password ${process.env.CONSOLE_PASSWORD}`);
gateway.once('exit', async (code, signal) => {
  await questdb.stop();
  process.exit(code ?? (signal === null ? 0 : 1));
});
