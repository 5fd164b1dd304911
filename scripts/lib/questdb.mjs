// Fetches, caches, starts and stops a local QuestDB server from its Maven Central jar.
// Used by the test suite, the benchmarks, the fault runs, the appliance build and `npm run local`.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { jvmArchive } from './jvm-archive.mjs';
import { cacheDir } from './paths.mjs';
import { freePorts } from './ports.mjs';

/** The newest QuestDB on Maven Central that runs on Java 17 (9.4 and later need Java 25). */
export const QUESTDB_VERSION = '9.3.4';
const QUESTDB_SHA256 = '939bc53ab22f93dbaa6545143a6e7c536d4904c07b7f2d381e8eef10436be062';
const MAVEN_CENTRAL = process.env.MAVEN_CENTRAL_URL ?? 'https://repo1.maven.org/maven2';
const MIN_JAVA = 17;

/**
 * The QuestDB settings the gateway's guarantees assume, wherever the project starts or documents a
 * QuestDB (here, compose.yaml, systemd/harbor-questdb.service; a test holds them to agreement):
 * ILP creates no table and no column, so a table dropped by hand is created again by the gateway
 * with its designated timestamp, deduplication and TTL, not by the next write without them; and the
 * TTL counts from the wall clock at the latest, so no row far ahead can make it drop current data.
 */
export const QUESTDB_GUARANTEE_SETTINGS = Object.freeze({
  QDB_LINE_AUTO_CREATE_NEW_TABLES: 'false',
  QDB_LINE_AUTO_CREATE_NEW_COLUMNS: 'false',
  QDB_CAIRO_TTL_USE_WALL_CLOCK: 'true',
});

/**
 * Small pages for a QuestDB that holds many small tables, as a test run's does: by default each
 * table takes about 170 MB of disk at its first rows (16 MB append pages per column and index), and
 * one run of the suite makes hundreds of tables. With these, 5 tables of 100 rows take 16 MB instead
 * of 864 MB. Page sizes change how files grow, not what is stored.
 */
export const QUESTDB_SMALL_TABLE_SETTINGS = Object.freeze({
  QDB_CAIRO_WRITER_DATA_APPEND_PAGE_SIZE: '128K',
  QDB_CAIRO_WAL_WRITER_DATA_APPEND_PAGE_SIZE: '128K',
  QDB_CAIRO_WRITER_DATA_INDEX_KEY_APPEND_PAGE_SIZE: '128K',
  QDB_CAIRO_WRITER_DATA_INDEX_VALUE_APPEND_PAGE_SIZE: '128K',
  QDB_CAIRO_O3_COLUMN_MEMORY_SIZE: '256K',
});

/** Throws, naming the port and what it is for, when another process listens on it. */
async function assertPortFree(/** @type {number} */ port, /** @type {string} */ what) {
  const probe = createServer();
  const inUse = await new Promise((resolveProbe) => {
    probe.once('error', (/** @type {NodeJS.ErrnoException} */ error) => resolveProbe(error.code === 'EADDRINUSE' ? true : error));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolveProbe(false)));
  });
  if (inUse === true) throw new Error(`cannot start QuestDB: port ${port} (${what}) is already in use by another process`);
  if (inUse instanceof Error) throw new Error(`cannot start QuestDB on port ${port} (${what}): ${inUse.message}`);
}

const sha256 = (/** @type {string} */ path) => createHash('sha256').update(readFileSync(path)).digest('hex');

/** The path of the QuestDB server jar, downloaded and checked against its pinned SHA-256 on first use. */
export async function fetchQuestDb() {
  const jar = join(cacheDir(), `questdb-${QUESTDB_VERSION}.jar`);
  if (existsSync(jar) && sha256(jar) === QUESTDB_SHA256) return jar;
  const url = `${MAVEN_CENTRAL}/org/questdb/questdb/${QUESTDB_VERSION}/questdb-${QUESTDB_VERSION}.jar`;
  const partial = `${jar}.${process.pid}.part`;
  const response = await fetch(url);
  if (!response.ok || response.body === null) throw new Error(`cannot download QuestDB from ${url}: HTTP ${response.status}`);
  await pipeline(Readable.fromWeb(/** @type {import('node:stream/web').ReadableStream} */ (response.body)), createWriteStream(partial));
  const digest = sha256(partial);
  if (digest !== QUESTDB_SHA256) {
    rmSync(partial, { force: true });
    throw new Error(`QuestDB jar from ${url} has SHA-256 ${digest}, expected ${QUESTDB_SHA256}`);
  }
  renameSync(partial, jar);
  return jar;
}

/** A java executable of version 17 or newer: $JAVA_HOME first, then PATH. */
export function findJava() {
  const candidates = [process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : undefined, 'java'];
  for (const java of candidates) {
    if (java === undefined) continue;
    const result = spawnSync(java, ['-version'], { encoding: 'utf8' });
    const match = /version "(\d+)/.exec(`${result.stderr ?? ''}${result.stdout ?? ''}`);
    if (match && Number(match[1]) >= MIN_JAVA) return java;
  }
  throw new Error(`QuestDB ${QUESTDB_VERSION} needs Java ${MIN_JAVA} or newer: set JAVA_HOME or put java on PATH`);
}

/**
 * @typedef {object} QuestDbServer
 * @property {string} httpUrl
 * @property {number} httpPort
 * @property {number} pgPort
 * @property {string} dataDir
 * @property {number | undefined} pid
 * @property {() => Promise<void>} stop  SIGTERM, then SIGKILL after 20 s
 * @property {() => Promise<void>} kill  SIGKILL at once
 * @property {() => string} log          what the server printed so far (tail)
 */

/**
 * Starts QuestDB on loopback and resolves once its HTTP endpoint answers.
 * @param {{ dataDir: string, httpPort?: number, pgPort?: number, heap?: string, env?: Record<string, string> }} options
 * @returns {Promise<QuestDbServer>}
 */
export async function startQuestDb(options) {
  const jar = await fetchQuestDb();
  const java = findJava();
  const dataDir = resolve(options.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const [chosenHttp, chosenPg] = await freePorts(2);
  const httpPort = options.httpPort ?? /** @type {number} */ (chosenHttp);
  const pgPort = options.pgPort ?? /** @type {number} */ (chosenPg);
  // Another server on the port would answer the readiness check below in QuestDB's place.
  await assertPortFree(httpPort, 'HTTP');
  await assertPortFree(pgPort, 'PostgreSQL wire');
  const archive = jvmArchive('questdb', java, [jar]);
  const child = spawn(
    java,
    [
      `-Xmx${options.heap ?? '1g'}`,
      '-XX:+UseParallelGC',
      ...archive.options,
      '-Dout=stdout',
      '-p',
      jar,
      '-m',
      'io.questdb/io.questdb.ServerMain',
      '-d',
      dataDir,
    ],
    {
      env: {
        ...process.env,
        QDB_HTTP_BIND_TO: `127.0.0.1:${httpPort}`,
        QDB_HTTP_MIN_ENABLED: 'false',
        QDB_PG_NET_BIND_TO: `127.0.0.1:${pgPort}`,
        QDB_LINE_TCP_ENABLED: 'false',
        QDB_LINE_UDP_ENABLED: 'false',
        QDB_TELEMETRY_ENABLED: 'false',
        ...QUESTDB_GUARANTEE_SETTINGS,
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const keep = (/** @type {Buffer} */ chunk) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((resolveExit) =>
    child.once('exit', (code, signal) => {
      archive.exited({ code, signal });
      resolveExit({ code, signal });
    }),
  );
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const httpUrl = `http://127.0.0.1:${httpPort}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`QuestDB exited during startup (${child.exitCode ?? child.signalCode}):\n${output.slice(-4000)}`);
    }
    try {
      const response = await fetch(`${httpUrl}/settings`);
      // Answered by this QuestDB only if it still runs (one that cannot bind its port exits).
      if (response.ok && child.exitCode === null && child.signalCode === null) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`QuestDB did not answer on ${httpUrl} within 90 s:\n${output.slice(-4000)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }

  const stopWith = async (/** @type {NodeJS.Signals} */ signal) => {
    process.off('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  };
  return {
    httpUrl,
    httpPort,
    pgPort,
    dataDir,
    pid: child.pid,
    stop: () => stopWith('SIGTERM'),
    kill: () => stopWith('SIGKILL'),
    log: () => output,
  };
}
