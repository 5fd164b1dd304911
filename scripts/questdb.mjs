// Fetches or starts QuestDB from the command line (scripts/lib/questdb.mjs does the work):
//   node scripts/questdb.mjs fetch
//   node scripts/questdb.mjs start [--data-dir DIR] [--http-port N] [--pg-port N]
import { QUESTDB_VERSION, fetchQuestDb, startQuestDb } from './lib/questdb.mjs';

const [command, ...rest] = process.argv.slice(2);
/** @type {Record<string, string>} */
const flags = {};
for (let i = 0; i < rest.length; i += 2) flags[String(rest[i]).replace(/^--/, '')] = String(rest[i + 1]);
if (command === 'fetch') {
  process.stdout.write(`${await fetchQuestDb()}\n`);
} else if (command === 'start') {
  const server = await startQuestDb({
    dataDir: flags['data-dir'] ?? './data/questdb',
    httpPort: flags['http-port'] ? Number(flags['http-port']) : undefined,
    pgPort: flags['pg-port'] ? Number(flags['pg-port']) : undefined,
  }).catch((/** @type {Error} */ error) => {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  });
  process.stdout.write(
    `QuestDB ${QUESTDB_VERSION}: HTTP ${server.httpUrl}, PostgreSQL wire 127.0.0.1:${server.pgPort}, data ${server.dataDir}\n`,
  );
  const stop = () => server.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
} else {
  process.stderr.write('usage: node scripts/questdb.mjs fetch | start [--data-dir DIR] [--http-port N] [--pg-port N]\n');
  process.exit(64);
}
