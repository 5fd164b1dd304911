// The ingest thread's work for one MQTT QoS 1 message, in process: `npm run bench:mqtt-hot-path
// [-- --messages N --rounds R --mode process-crash|power-loss --other DIR]`. The gateway's sources
// (and with `--other`, another checkout's, bundled from its `src/` as bench/lib/micro.mjs does) with
// their real queue file in a temporary directory: `--connections` device sessions on in-memory
// sockets, each keeping `--window` PUBLISHes of one reading in flight (harbor/v1/{ship}/{cargo}, a
// number), a new one sent as each PUBACK comes back, as bench/mqtt.mjs's generator does over TCP.
// What is left out is the kernel's side of the sockets. Prints µs of wall time a message, the
// fastest of the rounds and their median: a neighbour's load only ever adds time, so the fastest
// round is the figure a busy machine distorts least. With `--other`, the rounds alternate.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { EventEmitter } from 'node:events';
import { generate } from 'mqtt-packet';
import { importSources } from './lib/micro.mjs';
import { projectRoot } from '../scripts/lib/paths.mjs';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '7' },
    connections: { type: 'string', default: '16' },
    window: { type: 'string', default: '32' },
    mode: { type: 'string', default: 'process-crash' },
    other: { type: 'string' },
  },
});
const MESSAGES = Number(args.messages);
const CONNECTIONS = Number(args.connections);
const WINDOW = Number(args.window);
const KEY = 'bench-key-0123456789abcdef';

/** The session's parts from the sources under `root`. @param {string} root @param {string} name */
async function sources(root, name) {
  const src = resolve(root, 'src');
  return importSources(
    name,
    `
      export { DeviceSession, SessionTable } from '${src}/mqtt/device-session.ts';
      export { MqttIngest } from '${src}/mqtt/mqtt-ingest.ts';
      export { QueueWriter } from '${src}/queue/queue-writer.ts';
      export { IngestDeadLetters } from '${src}/queue/dead-letters.ts';
      export { ReceiveClock } from '${src}/reading/receive-clock.ts';
      export { readingSchema } from '${src}/reading/reading-schema.ts';
      export { GatewayStats, MqttStats } from '${src}/stats.ts';
      export { InflightBudget } from '${src}/http/inflight-budget.ts';
      export { FailureDelay } from '${src}/http/middleware/api-key/failure-delay.ts';
      export { KeyStore } from '${src}/keys/key-store.ts';
      export { createLogger } from '${src}/log/logger.ts';
    `,
  );
}

/** A socket in memory: counts the PUBACKs the session writes (4 bytes each) and calls `acked`. */
class MemorySocket extends EventEmitter {
  remoteAddress = '127.0.0.1';
  destroyed = false;
  writable = true;
  /** @param {(count: number) => void} acked */
  constructor(acked) {
    super();
    this.acked = acked;
    this.connacked = false;
  }
  /** @param {Buffer} bytes */
  write(bytes) {
    if (!this.connacked) {
      this.connacked = true;
      return true;
    }
    this.acked(bytes.length / 4);
    return true;
  }
  end() {}
  destroy() {
    this.destroyed = true;
  }
  setNoDelay() {}
  setTimeout() {}
  pause() {}
  resume() {}
  cork() {}
  uncork() {}
}

/** One round: a fresh queue, MESSAGES messages through CONNECTIONS sessions; µs a message. @param {any} m */
async function round(m) {
  const dir = mkdtempSync(join(tmpdir(), 'harbor-mqtt-hot-'));
  const logger = m.createLogger('silent');
  const keys = new m.KeyStore({ defaultKey: KEY, path: join(dir, 'api-keys'), pollMs: 60_000, logger });
  const queue = m.QueueWriter.open({ dataDir: dir, durability: args.mode, maxBytes: 1 << 30 });
  const deadLetters = new m.IngestDeadLetters(dir, args.mode);
  const clock = new m.ReceiveClock();
  const ingest = new m.MqttIngest({
    queue,
    delivery: { notifyAppended() {} },
    clock,
    stats: new m.GatewayStats(),
    keys,
    deadLetters,
    logger,
  });
  const limits = { maxIdLength: 100 };
  const deps = {
    keys,
    failureDelay: new m.FailureDelay(100, 60_000),
    stopping: new AbortController().signal,
    ingest,
    validator: { schema: m.readingSchema(limits), limits },
    maxBatchReadings: 1000,
    config: { port: 0, tlsPort: 0, anonymous: false, maxPacketBytes: 1 << 20, maxInflight: 100, keepAliveMaxS: 60 },
    connectTimeoutMs: 10_000,
    packetTimeoutMs: 10_000,
    budget: new m.InflightBudget(1 << 20),
    stats: new m.MqttStats(),
    sessions: new m.SessionTable(),
    queue,
    gate: { prove() {} },
    logger,
  };
  let sent = 0;
  let acked = 0;
  /** @type {(value: undefined) => void} */
  let finish = () => undefined;
  const done = new Promise((resolve) => {
    finish = resolve;
  });
  /** @type {Buffer[]} the PUBLISH frames, one a message id, made before the clock starts */
  const frames = Array.from({ length: WINDOW * 8 }, (_, i) =>
    generate({
      cmd: 'publish',
      topic: `harbor/v1/ship-${i % 16}/c${i % 8}`,
      payload: String((i % 1000) / 10),
      qos: 1,
      messageId: (i % 65535) + 1,
      dup: false,
      retain: false,
    }),
  );
  const sockets = Array.from({ length: CONNECTIONS }, () => {
    let next = 0;
    /** @type {MemorySocket} */
    const socket = new MemorySocket((count) => {
      acked += count;
      if (acked >= MESSAGES) finish(undefined);
      send(count);
    });
    /** Sends `count` more PUBLISHes in one chunk, as TCP would deliver them together. @param {number} count */
    const send = (count) => {
      const n = Math.min(count, MESSAGES - sent);
      if (n <= 0) return;
      sent += n;
      /** @type {Buffer[]} */
      const chunk = [];
      for (let i = 0; i < n; i++) chunk.push(/** @type {Buffer} */ (frames[next++ % frames.length]));
      socket.emit('data', Buffer.concat(chunk));
    };
    new m.DeviceSession(socket, deps);
    socket.emit(
      'data',
      generate({
        cmd: 'connect',
        protocolId: 'MQTT',
        protocolVersion: 4,
        clientId: `c${Math.random()}`,
        clean: true,
        keepalive: 60,
        username: 'bench',
        password: Buffer.from(KEY),
      }),
    );
    return { socket, send };
  });
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  for (const { send } of sockets) send(WINDOW);
  await done;
  const us = ((performance.now() - started) * 1000) / acked;
  const cpu = process.cpuUsage(cpuBefore);
  const cpuUs = (cpu.user + cpu.system) / acked;
  const commits = queue.stats().commits;
  for (const { socket } of sockets) socket.emit('close');
  deadLetters.close();
  queue.close();
  rmSync(dir, { recursive: true, force: true });
  return { us, cpuUs, perCommit: acked / commits };
}

const builds = [
  ...(args.other === undefined ? [] : [{ name: args.other, m: await sources(args.other, 'mqtt-hot-path-other') }]),
  { name: 'this build', m: await sources(projectRoot, 'mqtt-hot-path') },
];
const loadAtStart = loadavg()
  .map((l) => l.toFixed(1))
  .join(' ');
/** @type {Map<string, { us: number, cpuUs: number, perCommit: number }[]>} */
const results = new Map(builds.map((b) => [b.name, []]));
for (const b of builds) await round(b.m);
for (let r = 1; r <= Number(args.rounds); r++) {
  for (const b of r % 2 === 1 ? builds : [...builds].reverse()) {
    const result = await round(b.m);
    results.get(b.name)?.push(result);
    process.stdout.write(
      `round ${r}, ${b.name}: ${result.us.toFixed(2)} µs a message, ${result.cpuUs.toFixed(2)} µs of CPU, ${result.perCommit.toFixed(1)} messages a commit\n`,
    );
  }
}
process.stdout.write(
  `\n${args.mode}, ${MESSAGES} messages a round, ${CONNECTIONS} sessions × ${WINDOW} in flight; load average ${loadAtStart} at start, ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')} at end\n\n| Build | µs a message, fastest round | median | CPU µs a message, least | median |\n|---|---:|---:|---:|---:|\n`,
);
for (const [name, list] of results) {
  const us = list.map((r) => r.us).sort((a, b) => a - b);
  const cpu = list.map((r) => r.cpuUs).sort((a, b) => a - b);
  const mid = Math.floor(us.length / 2);
  process.stdout.write(`| ${name} | ${us[0]?.toFixed(2)} | ${us[mid]?.toFixed(2)} | ${cpu[0]?.toFixed(2)} | ${cpu[mid]?.toFixed(2)} |\n`);
}
