// Fetches, caches, starts and stops a single-node Apache Kafka broker (KRaft: broker and controller
// in one process) from its Maven Central jars. Used by the Kafka sink's tests, its benchmark and
// the fault runs.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Admin, Producer } from '@platformatic/kafka';
import { aptInstall } from './apt.mjs';
import { jvmArchive } from './jvm-archive.mjs';
import { cacheDir } from './paths.mjs';
import { freePorts } from './ports.mjs';
import { findJava } from './questdb.mjs';

/** The newest Kafka on Maven Central whose broker runs on Java 17 (its classes target 17). */
export const KAFKA_VERSION = '4.4.0';
const LOG4J_VERSION = '2.25.5';
const MAVEN_CENTRAL = process.env.MAVEN_CENTRAL_URL ?? 'https://repo1.maven.org/maven2';

// The broker and what it needs at run time, as Maven resolves it; the SLF4J binding routes the
// broker's log to log4j2, so a failed start prints why.
const POM = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>harbor-gateway</groupId><artifactId>kafka-broker</artifactId><version>1</version><packaging>pom</packaging>
  <repositories><repository><id>central</id><url>${MAVEN_CENTRAL}</url></repository></repositories>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>${KAFKA_VERSION}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>${LOG4J_VERSION}</version></dependency>
  </dependencies>
</project>
`;

const LOG4J2 = `rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
`;

/**
 * The directory of the broker's jars, resolved by Maven (checksums enforced) on first use. Maven
 * works in a directory of this run's own and the finished directory is renamed into place, so
 * concurrent runs never see half of it.
 */
export function fetchKafka() {
  const libDir = join(cacheDir(), `kafka-${KAFKA_VERSION}`);
  if (existsSync(libDir)) return libDir;
  aptInstall(['maven'], '/usr/bin/mvn');
  const work = mkdtempSync(join(cacheDir(), `kafka-${KAFKA_VERSION}.part-`));
  try {
    writeFileSync(join(work, 'pom.xml'), POM);
    const result = spawnSync(
      'mvn',
      [
        '-B',
        '-q',
        '--strict-checksums',
        `-Dmaven.repo.local=${join(work, 'm2')}`,
        'dependency:copy-dependencies',
        '-DincludeScope=runtime',
        `-DoutputDirectory=${join(work, 'lib')}`,
      ],
      { cwd: work, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    if (result.status !== 0) {
      throw new Error(
        `cannot fetch Kafka ${KAFKA_VERSION} from Maven Central (mvn exited ${result.status ?? result.signal}):\n${`${result.stdout}${result.stderr}`.slice(-4000)}`,
      );
    }
    try {
      renameSync(join(work, 'lib'), libDir);
    } catch (error) {
      // Another run finished first: its directory is as good.
      if (!existsSync(libDir)) throw error;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return libDir;
}

/** A KRaft cluster id: 16 random bytes in URL-safe base64, not starting with '-' (Kafka's own rule). */
function clusterId() {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/**
 * @typedef {object} KafkaBroker
 * @property {string} bootstrap         host:port of the plaintext listener
 * @property {string | undefined} saslBootstrap  host:port of the SASL_PLAINTEXT listener, when asked for
 * @property {string | undefined} tlsBootstrap   host:port of the SSL listener, when asked for
 * @property {string} dataDir
 * @property {() => number | undefined} pid
 * @property {() => Promise<void>} stop     SIGTERM (controlled shutdown), SIGKILL after 30 s; files kept
 * @property {() => Promise<void>} start    starts the stopped broker again on the same ports and files
 * @property {() => Promise<void>} close    stops it and removes its files
 * @property {() => string} log             what the broker printed since it last started (tail)
 */

/**
 * Starts a single-node KRaft broker on free loopback ports with freshly formatted storage and
 * resolves once it has started; throws (with the broker's output) when it does not.
 * @param {{ partitions?: number, heap?: string, sasl?: { username: string, password: string }, tls?: { cert: string, key: string }, advertisedPort?: number }} [options]
 *   `sasl` adds a SASL_PLAINTEXT listener taking PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 for that user;
 *   `tls` adds an SSL listener with that certificate and (PKCS#8) key, both PEM.
 *   `advertisedPort`: the port clients are told to reach the plaintext listener at (a proxy in front of it).
 * @returns {Promise<KafkaBroker>}
 */
export async function startKafka(options = {}) {
  const libDir = fetchKafka();
  let java;
  try {
    java = findJava();
  } catch {
    throw new Error(`Kafka ${KAFKA_VERSION} needs Java 17 or newer: set JAVA_HOME or put java on PATH`);
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'harbor-kafka-'));
  const [port, controllerPort, saslChoice, tlsChoice] = /** @type {number[]} */ (await freePorts(4));
  const saslPort = options.sasl ? saslChoice : undefined;
  const tlsPort = options.tls ? tlsChoice : undefined;
  const listeners = [`PLAINTEXT://127.0.0.1:${port}`, `CONTROLLER://127.0.0.1:${controllerPort}`];
  const advertised = [`PLAINTEXT://127.0.0.1:${options.advertisedPort ?? port}`];
  const properties = [
    'process.roles=broker,controller',
    'node.id=1',
    `controller.quorum.voters=1@127.0.0.1:${controllerPort}`,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    `log.dirs=${join(dataDir, 'log')}`,
    `num.partitions=${options.partitions ?? 3}`,
    'offsets.topic.num.partitions=1',
    'offsets.topic.replication.factor=1',
    'transaction.state.log.num.partitions=1',
    'transaction.state.log.replication.factor=1',
    'transaction.state.log.min.isr=1',
    'share.coordinator.state.topic.num.partitions=1',
    'share.coordinator.state.topic.replication.factor=1',
    'share.coordinator.state.topic.min.isr=1',
    'group.initial.rebalance.delay.ms=0',
    // A broker killed -9 and started again registers anew only once the controller has let its
    // old session lapse: 9 s by default, every restart of the crash runs.
    'broker.session.timeout.ms=3000',
    'broker.heartbeat.interval.ms=500',
    'auto.create.topics.enable=false',
    'num.network.threads=2',
    'num.io.threads=2',
    'background.threads=2',
  ];
  const users = /** @type {string[]} */ ([]);
  if (options.sasl) {
    const { username, password } = options.sasl;
    listeners.push(`SASL_PLAINTEXT://127.0.0.1:${saslPort}`);
    advertised.push(`SASL_PLAINTEXT://127.0.0.1:${saslPort}`);
    properties.push(
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512',
      `listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${username}="${password}";`,
      'listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
    );
    for (const mechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-512'])
      users.push('--add-scram', `${mechanism}=[name=${username},password=${password}]`);
  }
  if (options.tls) {
    const pem = join(dataDir, 'server.pem');
    writeFileSync(pem, `${options.tls.key.trim()}\n${options.tls.cert.trim()}\n`);
    listeners.push(`SSL://127.0.0.1:${tlsPort}`);
    advertised.push(`SSL://127.0.0.1:${tlsPort}`);
    properties.push('listener.name.ssl.ssl.keystore.type=PEM', `listener.name.ssl.ssl.keystore.location=${pem}`);
  }
  properties.push(
    `listeners=${listeners.join(',')}`,
    `advertised.listeners=${advertised.join(',')}`,
    'listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL',
  );
  const configFile = join(dataDir, 'server.properties');
  writeFileSync(configFile, `${properties.join('\n')}\n`);
  const log4jFile = join(dataDir, 'log4j2.properties');
  writeFileSync(log4jFile, LOG4J2);
  const jars = readdirSync(libDir).map((name) => join(libDir, name));
  /** The JVM options of a run, with the archive of the broker's classes when there is one. */
  const jvm = (/** @type {string[]} */ archive) => [
    `-Xmx${options.heap ?? '256m'}`,
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    ...archive,
    `-Dlog4j2.configurationFile=${log4jFile}`,
    '-cp',
    join(libDir, '*'),
  ];

  const format = spawnSync(
    java,
    [...jvm(jvmArchive('kafka', java, jars).useOnly), 'kafka.tools.StorageTool', 'format', '-t', clusterId(), '-c', configFile, ...users],
    {
      encoding: 'utf8',
    },
  );
  if (format.status !== 0) {
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(
      `formatting Kafka's storage failed (exit ${format.status ?? format.signal}):\n${`${format.stdout}${format.stderr}`.slice(-4000)}`,
    );
  }

  /** @type {import('node:child_process').ChildProcess | undefined} */
  let child;
  /** @type {Promise<unknown> | undefined} */
  let exited;
  let output = '';
  const killOnExit = () => child?.kill('SIGKILL');

  const start = async () => {
    const archive = jvmArchive('kafka', java, jars);
    const started = spawn(java, [...jvm(archive.options), 'kafka.Kafka', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = started;
    output = '';
    exited = new Promise((resolveExit) =>
      started.once('exit', (code, signal) => {
        archive.exited({ code, signal });
        resolveExit(undefined);
      }),
    );
    process.once('exit', killOnExit);
    const keep = (/** @type {Buffer} */ chunk) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    started.stdout?.on('data', keep);
    started.stderr?.on('data', keep);
    const deadline = Date.now() + 120_000;
    while (!output.includes('Kafka Server started')) {
      if (started.exitCode !== null || started.signalCode !== null) {
        throw new Error(`Kafka exited during startup (${started.exitCode ?? started.signalCode}):\n${output.slice(-4000)}`);
      }
      if (Date.now() > deadline) {
        started.kill('SIGKILL');
        throw new Error(`Kafka did not start on 127.0.0.1:${port} within 120 s:\n${output.slice(-4000)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const stop = async () => {
    process.off('exit', killOnExit);
    const running = child;
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
    running.kill('SIGTERM');
    const timer = setTimeout(() => running.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  };

  try {
    await start();
  } catch (error) {
    await stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    bootstrap: `127.0.0.1:${port}`,
    saslBootstrap: saslPort === undefined ? undefined : `127.0.0.1:${saslPort}`,
    tlsBootstrap: tlsPort === undefined ? undefined : `127.0.0.1:${tlsPort}`,
    dataDir,
    pid: () => child?.pid,
    stop,
    start,
    close: async () => {
      await stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
    log: () => output,
  };
}

/** Key of the one message `createKafkaTopic` writes to each partition; readers of a test topic skip it. */
export const TOPIC_READY_KEY = 'harbor-topic-ready';

/**
 * Creates a topic on a test broker (one replica) and waits until each of its partitions took a
 * message (keyed TOPIC_READY_KEY). Right after a topic's creation the first send to it sometimes
 * fails with PLT_KFK_OUT_OF_BOUNDS: the client (@platformatic/kafka 1.22) cannot parse the broker's
 * answer (it fails reading a partition's error message). A sink retries that as an outage; a test
 * that expects one clean delivery cannot.
 * @param {string} bootstrap
 * @param {string} topic
 * @param {number} [partitions]
 * @param {Record<string, string>} [configs]  topic settings, such as max.message.bytes
 */
export async function createKafkaTopic(bootstrap, topic, partitions = 3, configs = {}) {
  const admin = new Admin({ clientId: 'harbor-test-admin', bootstrapBrokers: [bootstrap] });
  try {
    await admin.createTopics({
      topics: [topic],
      partitions,
      replicas: 1,
      configs: Object.entries(configs).map(([name, value]) => ({ name, value })),
    });
    const producer = new Producer({ clientId: 'harbor-test-admin', bootstrapBrokers: [bootstrap], acks: -1, retries: 0 });
    try {
      const deadline = Date.now() + 60_000;
      for (let partition = 0; partition < partitions; partition++) {
        for (;;) {
          try {
            await producer.send({ messages: [{ topic, partition, key: Buffer.from(TOPIC_READY_KEY), value: Buffer.alloc(0) }] });
            break;
          } catch (error) {
            if (Date.now() > deadline)
              throw new Error(`topic ${topic}: partition ${partition} takes no message after 60 s`, { cause: error });
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      }
    } finally {
      await producer.close();
    }
  } finally {
    await admin.close();
  }
}
