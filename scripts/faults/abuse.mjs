// The abuse run: devices push readings at a steady rate over HTTP, HTTPS (a new TLS connection per
// request, as the ESP32 SDK sends them) and MQTT, first alone, then while clients without a device
// key attack together: a login flood from many source addresses (IPv4 and IPv6, some sharing a /64),
// idle sockets, slow-header clients on the console, a flood of MQTT CONNECTs with wrong keys and
// one of TLS handshakes, each on a new connection that never sends a request.
// Every device request must be answered 2xx and stored in QuestDB, and the devices' p99 with the
// attack must stay within 3 times their p99 without it. Both p99s are printed.
//
// Everything runs in a network namespace of its own (unshare --net, as an unprivileged user
// namespace), on addresses added to its loopback interface: 198.18.0.0/15 (set aside for such
// tests) and 2001:db8::/32 (documentation). No packet leaves it.
//
//   node scripts/faults/abuse.mjs [--seconds N] [--no-p99-bound] [--cpu-profile DIR] [--latencies FILE]
//       each phase N seconds (default 15; npm run test:abuse runs 120); --cpu-profile writes the
//       gateway's CPU profiles (its event loop and the delivery thread) to DIR when it stops;
//       --latencies writes every device request (protocol, phase, its start in ms since the run's,
//       its duration, its answer) to FILE as JSON

//   runAbuse(...) from scripts/faults/run.mjs      the short version of `npm run test:faults`
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { connect as tcpConnect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import mqtt from 'mqtt';
import { generate } from 'mqtt-packet';
import { startGatewayProcess } from '../lib/gateway-process.mjs';
import { projectRoot } from '../lib/paths.mjs';
import { cpuSeconds } from '../lib/proc.mjs';
import { freePorts } from '../lib/ports.mjs';
import { rowCount } from '../lib/questdb-sql.mjs';
import { startQuestDb } from '../lib/questdb.mjs';
import { percentile } from '../lib/stats.mjs';

const GATEWAY_V4 = '198.18.0.1';
const GATEWAY_V6 = '2001:db8:ff::1';
/** 40 IPv4 hosts, 15 IPv6 /64s, and 5 more addresses in the first /64: 60 addresses, 55 hosts. */
const ATTACKERS = [
  ...Array.from({ length: 40 }, (_, i) => `198.18.1.${i + 1}`),
  ...Array.from({ length: 15 }, (_, i) => `2001:db8:${i + 1}::1`),
  ...Array.from({ length: 5 }, (_, i) => `2001:db8:1::${i + 2}`),
];
const LOGIN_POSTS = 2000;
const IDLE_SOCKETS = 1100;
const SLOW_HEADER_CLIENTS = 20;
const MQTT_FLOODERS = 20;
/** Loops opening TLS connections as fast as they are let through, three on each of 10 hosts of their own. */
const HANDSHAKE_FLOODERS = 30;
const HANDSHAKE_ATTACKERS = Array.from({ length: 10 }, (_, i) => `198.18.2.${i + 1}`);
/** Each device sends a reading this often. */
const DEVICE_PERIOD_MS = 100;
const DEVICES_PER_PROTOCOL = 3;
/** Each HTTP and HTTPS device is a host of its own, as on a site's LAN (MQTT.js cannot choose its source address). */
const DEVICE_ADDRESSES = Array.from({ length: 2 * DEVICES_PER_PROTOCOL }, (_, i) => `198.18.0.${i + 2}`);
const MAX_P99_RATIO = 3;
const KEY = randomBytes(24).toString('hex');
const RESULT = 'ABUSE_RESULT ';

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs the abuse run in a network namespace of its own and reports whether it passed. `p99Bound`
 * false reports the devices' p99 ratio without failing on it. A ratio is a timing on a machine
 * shared with the attack's clients: with `attempts` above 1, a run whose only failure is the ratio
 * runs again, and the bound must hold in one of them (losses fail at once). On this machine's two
 * cores, quiet, four 15 s runs gave ratios of 1.41 to 2.47 (docs/benchmarks.md).
 * @param {{ bundlePath: string, seconds: number, log: (line: string) => void, p99Bound?: boolean, attempts?: number, cpuProfile?: string, latencies?: string }} options
 * @returns {Promise<boolean>}
 */
export async function runAbuse({ bundlePath, seconds, log, p99Bound = true, attempts = 1, cpuProfile, latencies }) {
  for (let attempt = 1; ; attempt++) {
    const result = await runOnce({ bundlePath, seconds, log, p99Bound, cpuProfile, latencies });
    if (result.pass || !result.ratioMissedOnly || attempt >= attempts) return result.pass;
    log(`abuse: the devices' p99 ratio was over ${MAX_P99_RATIO} and nothing else failed; run ${attempt + 1} of at most ${attempts}`);
  }
}

/**
 * One abuse run; `ratioMissedOnly` when it would have passed but for the p99 ratio.
 * @param {{ bundlePath: string, seconds: number, log: (line: string) => void, p99Bound: boolean, cpuProfile?: string, latencies?: string }} options
 * @returns {Promise<{ pass: boolean, ratioMissedOnly: boolean }>}
 */
async function runOnce({ bundlePath, seconds, log, p99Bound, cpuProfile, latencies }) {
  const setup = [
    'set -e',
    'ip link set lo up',
    `ip addr add ${GATEWAY_V4}/32 dev lo`,
    ...DEVICE_ADDRESSES.map((a) => `ip addr add ${a}/32 dev lo`),
    `ip -6 addr add ${GATEWAY_V6}/128 dev lo nodad`,
    ...ATTACKERS.map((a) => (a.includes(':') ? `ip -6 addr add ${a}/128 dev lo nodad` : `ip addr add ${a}/32 dev lo`)),
    ...HANDSHAKE_ATTACKERS.map((a) => `ip addr add ${a}/32 dev lo`),
    'exec "$@"',
  ].join('\n');
  const self = fileURLToPath(import.meta.url);
  const child = spawn(
    'unshare',
    [
      '--map-root-user',
      '--net',
      'sh',
      '-c',
      setup,
      'sh',
      process.execPath,
      self,
      '--inside',
      '--seconds',
      String(seconds),
      '--bundle',
      bundlePath,
      ...(p99Bound ? [] : ['--no-p99-bound']),
      ...(cpuProfile === undefined ? [] : ['--cpu-profile', resolve(cpuProfile)]),
      ...(latencies === undefined ? [] : ['--latencies', resolve(latencies)]),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let result = { pass: false, ratioMissedOnly: false };
  let partial = '';
  child.stdout.on('data', (/** @type {Buffer} */ chunk) => {
    partial += chunk.toString();
    const lines = partial.split('\n');
    partial = /** @type {string} */ (lines.pop());
    for (const line of lines) {
      if (line.startsWith(RESULT)) {
        const said = JSON.parse(line.slice(RESULT.length));
        result = { pass: said.pass === true, ratioMissedOnly: said.ratioMissedOnly === true };
      } else log(`abuse: ${line}`);
    }
  });
  const code = await new Promise((resolve) => child.once('exit', resolve));
  return { pass: result.pass && code === 0, ratioMissedOnly: result.ratioMissedOnly };
}

/** Inside the namespace: QuestDB, the gateway, the devices and the attack. */
async function inside(
  /** @type {number} */ seconds,
  /** @type {string} */ bundlePath,
  p99Bound = true,
  /** @type {string | undefined} */ cpuProfile = undefined,
  /** @type {string | undefined} */ latencies = undefined,
) {
  const say = (/** @type {string} */ line) => process.stdout.write(`${line}\n`);
  const dir = mkdtempSync(join(tmpdir(), 'harbor-abuse-'));
  const questdb = await startQuestDb({ dataDir: join(dir, 'questdb') });
  const [port, httpsPort, mqttPort, mqttTlsPort] = /** @type {[number, number, number, number]} */ (await freePorts(4));
  const table = `abuse_${process.pid}`;
  const gateway = await startGatewayProcess({
    bundle: bundlePath,
    // A sample every 0.5 ms: the profile then shows which stretches held the event loop.
    nodeArgs: cpuProfile === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${cpuProfile}`, '--cpu-prof-interval=500'],
    env: {
      HOST: '::',
      PORT: String(port),
      HTTPS_PORT: String(httpsPort),
      MQTT: 'on',
      MQTT_PORT: String(mqttPort),
      MQTT_TLS_PORT: String(mqttTlsPort),
      API_KEY: KEY,
      CONSOLE_PASSWORD: randomBytes(16).toString('hex'),
      DATA_DIR: join(dir, 'gateway'),
      QUESTDB_URL: questdb.httpUrl,
      QUESTDB_TABLE: table,
      RETENTION_DAYS: '0',
      MAX_TIME_AHEAD_S: '9999999999',
      LOG_LEVEL: 'info',
    },
  });
  const target = { port, httpsPort, mqttPort };
  let pass = false;
  let ratioMissedOnly = false;
  try {
    const devices = startDevices(target);
    await sleep(2000);
    devices.mark('without');
    const cpuBefore = cpuMs(gateway.child.pid);
    await sleep(seconds * 1000);
    devices.mark('with');
    const cpuWithout = cpuMs(gateway.child.pid) - cpuBefore;
    const attack = attackProcess(target, seconds * 1000);
    await sleep(seconds * 1000);
    devices.mark('after');
    const cpuWith = cpuMs(gateway.child.pid) - cpuBefore - cpuWithout;
    const attackReport = await attack.stop();
    const report = await devices.stop();
    const accepted = report.all.filter((a) => a.ok).length;
    const failures = report.all.filter((a) => !a.ok);
    await waitForRows(questdb.httpUrl, table, accepted);
    const stored = (await rowCount(questdb.httpUrl, table)) ?? 0;
    if (latencies !== undefined) writeFileSync(latencies, JSON.stringify(report.all));
    const p99 = (/** @type {'without' | 'with'} */ phase, protocol = '') =>
      percentile(
        report.all.filter((a) => a.phase === phase && a.protocol.startsWith(protocol)).map((a) => a.ms),
        99,
      ) ?? Number.NaN;
    const without = p99('without');
    const withAttack = p99('with');
    const ratio = withAttack / without;
    say(`attack: ${JSON.stringify(attackReport)}`);
    const share = (/** @type {number} */ ms) => `${((100 * ms) / (seconds * 1000)).toFixed(0)} % of a core`;
    say(`gateway CPU, every thread: without the attack ${share(cpuWithout)}, with it ${share(cpuWith)}`);
    const held = gateway.logs.reduce((n, l) => n + (l.event === 'connections_shed' ? Number(l.handshakesHeld ?? 0) : 0), 0);
    say(`gateway: ${held} TLS connections held back for their host's handshake budget`);
    for (const protocol of ['http', 'https', 'mqtt']) {
      const count = (/** @type {string} */ phase) => report.all.filter((a) => a.protocol === protocol && a.phase === phase).length;
      say(
        `devices ${protocol}: p99 without the attack ${p99('without', protocol).toFixed(1)} ms (${count('without')} requests), with it ${p99('with', protocol).toFixed(1)} ms (${count('with')} requests)`,
      );
    }
    say(
      `DEVICES' P99 WITHOUT THE ATTACK: ${without.toFixed(1)} ms; WITH IT: ${withAttack.toFixed(1)} ms; ratio ${ratio.toFixed(2)} (${p99Bound ? `at most ${MAX_P99_RATIO}` : 'reported, not bounded in this run'})`,
    );
    say(
      `device requests: ${report.all.length} sent, ${accepted} answered 2xx, ${failures.length} not (${JSON.stringify(failures.slice(0, 5))}); stored ${stored}`,
    );
    const passBut =
      failures.length === 0 &&
      stored === accepted &&
      attackReport.loginPosts >= LOGIN_POSTS &&
      attackReport.loginSources >= 50 &&
      report.all.some((a) => a.phase === 'with');
    const ratioHeld = !p99Bound || ratio <= MAX_P99_RATIO;
    pass = passBut && ratioHeld;
    ratioMissedOnly = passBut && !ratioHeld;
    if (failures.length > 0) {
      const warnings = gateway.logs.filter((l) => typeof l.level === 'number' && l.level >= 40 && l.event !== 'audit');
      for (const line of warnings.slice(-10)) say(`gateway: ${JSON.stringify(line)}`);
    }
    say(pass ? 'PASS' : 'FAIL');
  } finally {
    gateway.child.kill('SIGTERM');
    await gateway.exited;
    await questdb.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${RESULT}${JSON.stringify({ pass, ratioMissedOnly })}\n`);
  process.exit(pass ? 0 : 1);
}

/** CPU time of the gateway's process, every thread, in ms. */
const cpuMs = (/** @type {number | undefined} */ pid) => 1000 * (cpuSeconds(/** @type {number} */ (pid)) ?? Number.NaN);

async function waitForRows(/** @type {string} */ url, /** @type {string} */ table, /** @type {number} */ expected) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (((await rowCount(url, table).catch(() => 0)) ?? 0) >= expected) return;
    await sleep(250);
  }
}

/**
 * Devices of each protocol sending a reading every DEVICE_PERIOD_MS, each reading with its own value.
 * @param {{ port: number, httpsPort: number, mqttPort: number }} target
 */
function startDevices(target) {
  /** @type {{ at: number, protocol: string, phase: string, ms: number, ok: boolean, status?: number | string }[]} */
  const answered = [];
  const begun = performance.now();
  let phase = 'warm-up';
  let running = true;
  let n = 0;
  const reading = (/** @type {string} */ ship) => {
    const value = n++;
    return { ship_id: ship, cargo_id: 'seq', value, time: `2024-01-01T00:00:00.${String(value).padStart(9, '0')}Z` };
  };
  const agents = DEVICE_ADDRESSES.map((localAddress) => new HttpAgent({ keepAlive: true, localAddress }));
  const post = (/** @type {number} */ device, /** @type {boolean} */ tls, /** @type {string} */ body) =>
    new Promise((resolve) => {
      const options = {
        host: GATEWAY_V4,
        port: tls ? target.httpsPort : target.port,
        path: '/api/v2/ingest',
        method: 'POST',
        // HTTPS as the ESP32 SDK: a new connection (and handshake) for every request.
        agent: tls ? false : agents[device],
        localAddress: DEVICE_ADDRESSES[device],
        rejectUnauthorized: false,
        headers: { 'content-type': 'application/json', 'x-api-key': KEY, 'content-length': Buffer.byteLength(body) },
        timeout: 30_000,
      };
      const req = (tls ? httpsRequest : httpRequest)(options, (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      });
      req.once('timeout', () => req.destroy(new Error('timeout')));
      req.once('error', (error) => resolve(/** @type {NodeJS.ErrnoException} */ (error).code ?? error.message));
      req.end(body);
    });
  const loop = async (
    /** @type {string} */ protocol,
    /** @type {(body: object) => Promise<number | string>} */ send,
    /** @type {string} */ ship,
  ) => {
    while (running) {
      const started = performance.now();
      const startedIn = phase;
      const status = await send(reading(ship));
      const ms = performance.now() - started;
      answered.push({
        at: Math.round(started - begun),
        protocol,
        phase: startedIn,
        ms,
        ok: typeof status === 'number' && status >= 200 && status < 300,
        status,
      });
      await sleep(Math.max(0, DEVICE_PERIOD_MS - ms));
    }
  };
  /** @type {import('mqtt').MqttClient[]} */
  const clients = [];
  /** @type {Promise<void>[]} */
  const loops = [];
  for (let i = 0; i < DEVICES_PER_PROTOCOL; i++) {
    loops.push(loop('http', (r) => post(2 * i, false, JSON.stringify(r)), `abuse-http-${i}`));
    loops.push(loop('https', (r) => post(2 * i + 1, true, JSON.stringify(r)), `abuse-https-${i}`));
    loops.push(
      (async () => {
        const client = await mqtt.connectAsync(`mqtt://${GATEWAY_V4}:${target.mqttPort}`, {
          clientId: `abuse-mqtt-${i}`,
          username: 'device',
          password: KEY,
          reconnectPeriod: 0,
        });
        clients.push(client);
        await loop(
          'mqtt',
          (r) =>
            // A PUBACK that never comes (the session closed under it) is a failure, not a hang.
            Promise.race([
              client.publishAsync('harbor/v1/ingest', JSON.stringify(r), { qos: 1 }).then(
                (ack) => {
                  const code = /** @type {{ reasonCode?: number } | undefined} */ (ack)?.reasonCode ?? 0;
                  return code < 0x80 ? 200 : code;
                },
                (/** @type {Error} */ error) => error.message,
              ),
              sleep(30_000).then(() => 'no PUBACK within 30 s'),
            ]),
          `abuse-mqtt-${i}`,
        );
      })(),
    );
  }
  return {
    mark: (/** @type {string} */ next) => {
      phase = next;
    },
    stop: async () => {
      running = false;
      await Promise.all(loops);
      await Promise.all(clients.map((c) => c.endAsync(true)));
      for (const agent of agents) agent.destroy();
      return { all: answered };
    },
  };
}

/**
 * The attack in a process of its own, so its clients' work does not slow the devices' clients, and
 * at the lowest priority: on a LAN the attacker's CPU is its own machine's, and on this one's two
 * cores its clients' work would otherwise weigh on the gateway's share, which is what is measured.
 * @param {{ port: number, httpsPort: number, mqttPort: number }} target
 * @param {number} ms
 */
function attackProcess(target, ms) {
  const self = fileURLToPath(import.meta.url);
  const child = spawn('nice', ['-n', '19', process.execPath, self, '--attack', JSON.stringify({ target, ms })], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (/** @type {Buffer} */ chunk) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    stop: async () => {
      await exited;
      return JSON.parse(output.trim().split('\n').at(-1) ?? '{}');
    },
  };
}

/**
 * Every kind of client without a device key at once, until stopped: each loop is bounded by `ms`.
 * @param {{ port: number, httpsPort: number, mqttPort: number }} target
 * @param {number} ms
 */
function startAttack(target, ms) {
  const until = Date.now() + ms;
  let running = true;
  const report = {
    loginPosts: 0,
    loginSources: 0,
    loginStatuses: /** @type {Record<string, number>} */ ({}),
    idleOpened: 0,
    idleClosedByGateway: 0,
    slowHeaderConnections: 0,
    mqttConnects: 0,
    tlsHandshakes: 0,
    tlsHandshakesPerSecond: 0,
  };
  const live = () => running && Date.now() < until;
  const gatewayOf = (/** @type {string} */ source) => (source.includes(':') ? GATEWAY_V6 : GATEWAY_V4);

  // The login flood: each source address logs in over one kept-alive HTTPS connection, wrong password after wrong password.
  const sources = new Set();
  // LOGIN_POSTS in every 15 s of attack, spread over it: a flood at a steady rate, whatever its length.
  const perSource = Math.ceil((LOGIN_POSTS * Math.max(1, ms / 15_000)) / ATTACKERS.length);
  const spacingMs = ms / perSource;
  const login = ATTACKERS.map(async (source) => {
    const agent = new HttpsAgent({ keepAlive: true, maxSockets: 1, localAddress: source, rejectUnauthorized: false });
    /** @type {Map<string, string>} */
    const cookies = new Map();
    const send = (/** @type {string} */ method, /** @type {string | undefined} */ body) =>
      new Promise((resolve) => {
        const req = httpsRequest(
          {
            host: gatewayOf(source),
            port: target.httpsPort,
            path: '/console/login',
            method,
            agent,
            headers: {
              host: 'gateway.local',
              cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
              ...(body === undefined
                ? {}
                : { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) }),
            },
            timeout: 30_000,
          },
          (res) => {
            for (const cookie of res.headers['set-cookie'] ?? []) {
              const [pair] = cookie.split(';');
              const [name, value] = /** @type {string} */ (pair).split('=');
              cookies.set(/** @type {string} */ (name), value ?? '');
            }
            let html = '';
            res.on('data', (chunk) => (html += chunk));
            res.once('end', () => resolve({ status: res.statusCode ?? 0, html }));
          },
        );
        req.once('timeout', () => req.destroy(new Error('timeout')));
        req.once('error', (error) => resolve({ status: /** @type {NodeJS.ErrnoException} */ (error).code ?? 'error', html: '' }));
        req.end(body);
      });
    let token = '';
    const started = Date.now();
    for (let sent = 0; sent < perSource && live(); sent++) {
      await sleep(Math.max(0, started + sent * spacingMs - Date.now()));
      if (token === '') {
        const page = /** @type {{ status: number | string, html: string }} */ (await send('GET', undefined));
        token = /name="_login" value="([^"]+)"/.exec(page.html)?.[1] ?? '';
      }
      const form = new URLSearchParams({ _login: token, password: `guess-${sent}`, next: '/console/' }).toString();
      const answer = /** @type {{ status: number | string, html: string }} */ (await send('POST', form));
      report.loginPosts += 1;
      sources.add(source);
      report.loginStatuses[answer.status] = (report.loginStatuses[answer.status] ?? 0) + 1;
      token = /name="_login" value="([^"]+)"/.exec(answer.html)?.[1] ?? '';
    }
    agent.destroy();
  });

  // Idle sockets: 1,100 of them, each opened again 5 s after the gateway closes it, as a client that retries.
  /** @type {Set<import('node:net').Socket>} */
  const idle = new Set();
  const openIdle = (/** @type {number} */ i) => {
    if (!live()) return;
    const source = /** @type {string} */ (ATTACKERS[i % ATTACKERS.length]);
    const socket = tcpConnect({ host: gatewayOf(source), port: target.port, localAddress: source });
    report.idleOpened += 1;
    idle.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      idle.delete(socket);
      if (!live()) return;
      report.idleClosedByGateway += 1;
      setTimeout(() => openIdle(i), 5000);
    });
  };
  for (let i = 0; i < IDLE_SOCKETS; i++) openIdle(i);

  // Slow headers on the console: a byte a second, never the end of the headers.
  const slow = Array.from({ length: SLOW_HEADER_CLIENTS }, async (_, i) => {
    const source = /** @type {string} */ (ATTACKERS[(i * 7) % ATTACKERS.length]);
    while (live()) {
      report.slowHeaderConnections += 1;
      const socket = tcpConnect({ host: gatewayOf(source), port: target.port, localAddress: source });
      socket.on('error', () => undefined);
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.write('GET /console/login HTTP/1.1\r\nHost: gateway.local\r\nX-Slow: ');
      const drip = setInterval(() => socket.write('a'), 1000);
      await Promise.race([closed, sleep(Math.max(0, until - Date.now()))]);
      clearInterval(drip);
      socket.destroy();
    }
  });

  // CONNECTs with wrong keys, each on a new connection, as fast as they are answered.
  const connectPacket = generate({
    cmd: 'connect',
    protocolId: 'MQTT',
    protocolVersion: 4,
    clean: true,
    clientId: 'flood',
    keepalive: 30,
    username: 'x',
    password: Buffer.from('wrong-key'),
  });
  const mqttFlood = Array.from({ length: MQTT_FLOODERS }, async (_, i) => {
    const source = /** @type {string} */ (ATTACKERS[(i * 3) % ATTACKERS.length]);
    while (live()) {
      const socket = tcpConnect({ host: gatewayOf(source), port: target.mqttPort, localAddress: source });
      socket.on('error', () => undefined);
      socket.write(connectPacket);
      report.mqttConnects += 1;
      await Promise.race([new Promise((resolve) => socket.once('close', resolve)), sleep(2000)]);
      socket.destroy();
    }
  });

  // Full TLS handshakes, each on a new connection closed once it is up: what costs the gateway the
  // most CPU for a client without a key.
  const handshakeFlood = Array.from({ length: HANDSHAKE_FLOODERS }, async (_, i) => {
    const source = /** @type {string} */ (HANDSHAKE_ATTACKERS[i % HANDSHAKE_ATTACKERS.length]);
    while (live()) {
      await new Promise((resolve) => {
        const tcp = tcpConnect({ host: gatewayOf(source), port: target.httpsPort, localAddress: source });
        const socket = tlsConnect({ socket: tcp, rejectUnauthorized: false });
        tcp.on('error', () => undefined);
        const timer = setTimeout(() => socket.destroy(), 5000);
        socket.once('secureConnect', () => {
          report.tlsHandshakes += 1;
          socket.destroy();
        });
        socket.on('error', () => undefined);
        socket.once('close', () => {
          clearTimeout(timer);
          resolve(undefined);
        });
      });
    }
  });

  return {
    stop: async () => {
      await Promise.all(login);
      running = false;
      for (const socket of idle) socket.destroy();
      await Promise.all([...slow, ...mqttFlood, ...handshakeFlood]);
      report.tlsHandshakesPerSecond = Math.round((report.tlsHandshakes * 1000) / ms);
      report.loginSources = sources.size;
      return report;
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const option = (/** @type {string} */ name) => {
    const index = process.argv.indexOf(name);
    return index > 0 ? process.argv[index + 1] : undefined;
  };
  const secondsArg = process.argv.indexOf('--seconds');
  const seconds = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : 15;
  const bundleArg = process.argv.indexOf('--bundle');
  const bundlePath = bundleArg > 0 ? /** @type {string} */ (process.argv[bundleArg + 1]) : join(projectRoot, 'dist', 'gateway.mjs');
  const attackArg = process.argv.indexOf('--attack');
  if (attackArg > 0) {
    const { target, ms } = JSON.parse(/** @type {string} */ (process.argv[attackArg + 1]));
    const attack = startAttack(target, ms);
    await sleep(ms);
    process.stdout.write(`${JSON.stringify(await attack.stop())}\n`);
    process.exit(0);
  } else if (process.argv.includes('--inside')) {
    await inside(seconds, bundlePath, !process.argv.includes('--no-p99-bound'), option('--cpu-profile'), option('--latencies'));
  } else {
    const passed = await runAbuse({
      bundlePath,
      seconds,
      log: (line) => process.stdout.write(`${new Date().toISOString()} ${line}\n`),
      p99Bound: !process.argv.includes('--no-p99-bound'),
      cpuProfile: option('--cpu-profile'),
      latencies: option('--latencies'),
    });
    process.exit(passed ? 0 : 1);
  }
}
