// Runs the gateway with a local QuestDB on this machine: `npm run local`. Ctrl-C stops both.
// QuestDB keeps its data in ./data/questdb and the gateway its queue in ./data/gateway.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { GATEWAY_NODE_OPTIONS } from './lib/node-options.mjs';
import { QUESTDB_VERSION, startQuestDb } from './lib/questdb.mjs';
import { freePort } from './lib/ports.mjs';
import { projectRoot } from './lib/paths.mjs';

/** The preferred port when it is free, otherwise any free one. */
const portOr = (/** @type {number} */ preferred) =>
  new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(freePort()));
    probe.listen(preferred, '127.0.0.1', () => probe.close(() => resolve(preferred)));
  });

const dataDir = join(projectRoot, 'data');
process.stdout.write(`starting QuestDB ${QUESTDB_VERSION} (first run downloads it from Maven Central)...\n`);
const questdb = await startQuestDb({
  dataDir: join(dataDir, 'questdb'),
  httpPort: /** @type {number} */ (await portOr(9000)),
  pgPort: /** @type {number} */ (await portOr(8812)),
});
process.stdout.write(`QuestDB: ${questdb.httpUrl} (PostgreSQL wire on 127.0.0.1:${questdb.pgPort}, user admin, password quest)\n`);

// The console's password: yours when CONSOLE_PASSWORD is set, else a new one for this run.
process.env.CONSOLE_PASSWORD ||= randomBytes(12).toString('base64url');
const gateway = spawn(process.execPath, [join(projectRoot, 'dist', 'gateway.mjs')], {
  stdio: 'inherit',
  env: { NODE_OPTIONS: GATEWAY_NODE_OPTIONS, DATA_DIR: join(dataDir, 'gateway'), QUESTDB_URL: questdb.httpUrl, ...process.env },
});

process.stdout.write(
  `console: https://localhost:${process.env.HTTPS_PORT || 8443}/console/ (self-signed certificate), password ${process.env.CONSOLE_PASSWORD}\n`,
);

let stopping = false;
const stop = (/** @type {NodeJS.Signals} */ signal) => {
  if (stopping) return;
  stopping = true;
  gateway.kill(signal);
};
process.on('SIGINT', () => stop('SIGINT'));
process.on('SIGTERM', () => stop('SIGTERM'));
gateway.once('exit', async (code) => {
  await questdb.stop();
  process.exit(code ?? 0);
});
