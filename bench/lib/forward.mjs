// The steps of bench/forward.mjs: queue a backlog, let one sink deliver it, check the destination.
import { Consumer } from '@platformatic/kafka';
import { cpuSeconds } from '../../scripts/lib/proc.mjs';
import { monotonicUs } from './cpu-profile.mjs';
import { rowCount } from '../../scripts/lib/questdb-sql.mjs';
import { batchTemplate, fillBatchBody } from '../../scripts/lib/readings.mjs';
import { startBenchGateway } from './gateway.mjs';

const DEADLINE_MS = 600_000;
const pause = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts a gateway with `env`, queues `total` readings in batches of 1,000 from four connections,
 * and stops it.
 * @param {{ bundle: string, apiKey: string, total: number, env: Record<string, string> }} options
 */
export async function fillQueue({ bundle, apiKey, total, env }) {
  const gw = await startBenchGateway({ bundle, apiKey, env });
  try {
    const template = batchTemplate(1000);
    const baseMs = Date.now();
    let next = 0;
    const worker = async () => {
      while (next < total / 1000) {
        const response = await fetch(`${gw.url}/api/v2/ingest/batch`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
          body: fillBatchBody(template, baseMs, next++),
        });
        await response.arrayBuffer();
        if (!response.ok) throw new Error(`fill: POST answered ${response.status}`);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  } finally {
    await gw.stop('SIGTERM');
  }
}

/** Sum of the topic's end offsets: messages written to it so far. */
export async function topicMessages(/** @type {string} */ bootstrap, /** @type {string} */ topic) {
  const consumer = new Consumer({ clientId: 'harbor-bench', groupId: 'harbor-bench', bootstrapBrokers: [bootstrap] });
  try {
    const ends = (await consumer.listOffsets({ topics: [topic] })).get(topic) ?? [];
    return ends.reduce((sum, end) => sum + Number(end), 0);
  } finally {
    await consumer.close(true);
  }
}

/** Whether `table` comes to hold exactly `total` rows (QuestDB applies its WAL after the write is acknowledged). */
export async function tableHolds(/** @type {string} */ url, /** @type {string} */ table, /** @type {number} */ total) {
  for (let i = 0; i < 600 && ((await rowCount(url, table)) ?? 0) < total; i++) await pause(200);
  return (await rowCount(url, table)) === total;
}

/**
 * Waits until the gateway's `sink` has no backlog and its `delivered` log lines count `total`
 * readings (the last line may be read from the pipe after /status already shows the backlog gone),
 * and returns those lines.
 * @param {import('./gateway.mjs').BenchGateway} gw
 * @param {string} sink
 * @param {number} total
 */
async function drained(gw, sink, total) {
  const deadline = Date.now() + DEADLINE_MS;
  const backlog = async () => {
    // /status lists every sink with its backlog.
    const status = /** @type {{ sinks: { name: string, backlog: number }[] }} */ (/** @type {unknown} */ (await gw.status()));
    return status.sinks.find((s) => s.name === sink)?.backlog;
  };
  const lines = () => gw.logs.filter((l) => l.event === 'delivered' && l.sink === sink);
  const logged = () => lines().reduce((n, l) => n + Number(l.readings), 0);
  while ((await backlog()) !== 0 || logged() < total) {
    if (Date.now() > deadline) throw new Error(`${sink}: backlog not delivered within ${DEADLINE_MS / 1000} s`);
    await pause(50);
  }
  return lines();
}

/**
 * Watches `gw`'s log for `sink`'s deliveries and, once they count `warmUp` readings, notes the
 * process's CPU seconds and the readings delivered by then: the start of the steady state, once
 * the sink's client is loaded and its code compiled. Polled every 2 ms, so the CPU noted is at
 * most that late (the next delivery has begun, and it counts into the steady state).
 * @param {import('./gateway.mjs').BenchGateway} gw
 * @param {string} sink
 * @param {number} warmUp
 */
function watchWarmUp(gw, sink, warmUp) {
  const mark = { cpu: /** @type {number | undefined} */ (undefined), readings: 0 };
  let seen = 0;
  const timer = setInterval(() => {
    for (; seen < gw.logs.length; seen++) {
      const line = /** @type {Record<string, unknown>} */ (gw.logs[seen]);
      if (line.event === 'delivered' && line.sink === sink) mark.readings += Number(line.readings);
    }
    if (mark.readings < warmUp) return;
    mark.cpu = cpuSeconds(gw.pid);
    clearInterval(timer);
  }, 2);
  return { mark, stop: () => clearInterval(timer) };
}

const cpuSince = (/** @type {number | undefined} */ pid, /** @type {number} */ before) =>
  pid === undefined ? undefined : (cpuSeconds(pid) ?? 0) - before;

/**
 * Starts the site gateway on the queue its `env` names and waits until `sink` has delivered the
 * backlog (and, with a `central` gateway, until the central has delivered it to its QuestDB).
 * Returns the rate, from the start of the site's first delivery to the end of the last delivery
 * (the central's when there is one), as logged; the site's, the central's and the destination's
 * CPU seconds per million readings over that time. With `warmUp`, the site's CPU per million
 * once that many readings were delivered (the steady state), and what the site spent beyond that
 * rate over the whole backlog (the one-off: loading the sink's client, compiling, connecting).
 * `nodeArgs` go to the site gateway's node (such as `--cpu-prof`).
 * @param {{ bundle: string, apiKey: string, total: number, env: Record<string, string>, sink: string,
 *   done: () => Promise<boolean>, destinationPid?: number, central?: import('./gateway.mjs').BenchGateway, nodeArgs?: string[],
 *   warmUp?: number }} options
 */
export async function forward({ bundle, apiKey, total, env, sink, done, destinationPid, central, nodeArgs, warmUp = 0 }) {
  const gw = await startBenchGateway({ bundle, apiKey, env, nodeArgs });
  try {
    const before = {
      site: cpuSeconds(gw.pid) ?? 0,
      central: central === undefined ? 0 : (cpuSeconds(central.pid) ?? 0),
      destination: destinationPid === undefined ? 0 : (cpuSeconds(destinationPid) ?? 0),
    };
    // On V8's profile clock: the delivery, without the gateway's start.
    const window = { fromUs: monotonicUs(), toUs: 0 };
    const warm = warmUp > 0 ? watchWarmUp(gw, sink, warmUp) : undefined;
    const deliveries = await drained(gw, sink, total);
    window.toUs = monotonicUs();
    warm?.stop();
    const centralDeliveries = central === undefined ? [] : await drained(central, 'questdb', total);
    const site = cpuSince(gw.pid, before.site) ?? 0;
    const centralCpu = cpuSince(central?.pid, before.central);
    const destination = cpuSince(destinationPid, before.destination);
    const first = /** @type {Record<string, any>} */ (deliveries[0]);
    const ends = [deliveries.at(-1), centralDeliveries.at(-1)].filter((l) => l !== undefined).map((l) => Date.parse(String(l.time)));
    const seconds = (Math.max(...ends) - (Date.parse(first.time) - first.durationMs)) / 1000;
    const delivered = deliveries.reduce((n, l) => n + Number(l.readings), 0);
    if (delivered !== total) throw new Error(`${sink}: delivered ${delivered} readings, expected ${total}`);
    if (!(await done())) throw new Error(`${sink}: the destination does not hold the ${total} readings`);
    const perMillion = (/** @type {number | undefined} */ cpu) => (cpu === undefined ? undefined : (cpu / total) * 1e6);
    const steady =
      warm?.mark.cpu === undefined || warm.mark.readings >= total
        ? undefined
        : ((before.site + site - warm.mark.cpu) / (total - warm.mark.readings)) * 1e6;
    return {
      readingsPerSec: total / seconds,
      siteCpuPerMillion: /** @type {number} */ (perMillion(site)),
      steadyCpuPerMillion: steady,
      oneOffCpu: steady === undefined ? undefined : site - (steady * total) / 1e6,
      centralCpuPerMillion: perMillion(centralCpu),
      destinationCpuPerMillion: perMillion(destination),
      deliveries: deliveries.length,
      window,
    };
  } finally {
    await gw.stop('SIGTERM');
  }
}
