// An open-loop load at a fixed rate: request k is due at start + k / rate whatever the answers
// took, and its latency runs from when it was due, so a gateway that falls behind shows it.
import { msPrefix, readingTail } from '../../scripts/lib/readings.mjs';
import { sleep } from './harness.mjs';

/**
 * The body of request `k`: one reading, or `batch` readings; nanosecond digits from k and the
 * reading's index keep every reading unique.
 * @param {number} k
 * @param {number} batch
 */
function body(k, batch) {
  const prefix = msPrefix(Date.now());
  const reading = (/** @type {number} */ i) =>
    `{"time":"${prefix}${String(k % 10_000).padStart(4, '0')}${String(i % 100).padStart(2, '0')}Z",${readingTail(k * batch + i)}`;
  return batch === 1 ? reading(0) : `[${Array.from({ length: batch }, (_, i) => reading(i)).join(',')}]`;
}

/**
 * Posts `rate` requests a second for `seconds` to the gateway at `url`.
 * @param {{ url: string, apiKey: string, rate: number, seconds: number, batch?: number, maxInFlight?: number }} options
 * @returns {Promise<{ readings: number, jsonBytes: number, failed: number, latenciesMs: number[] }>}
 */
export async function pacedLoad({ url, apiKey, rate, seconds, batch = 1, maxInFlight = 1024 }) {
  const path = batch === 1 ? '/api/v2/ingest/' : '/api/v2/ingest/batch';
  const start = performance.now();
  const total = Math.round(rate * seconds);
  let readings = 0;
  let jsonBytes = 0;
  let failed = 0;
  /** @type {number[]} */
  const latenciesMs = [];
  /** @type {Set<Promise<void>>} */
  const inFlight = new Set();
  for (let k = 0; k < total; k++) {
    const due = start + (k * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    // Past the bound the generator itself waits: the late start counts in the latency.
    while (inFlight.size >= maxInFlight) await Promise.race(inFlight);
    const text = body(k, batch);
    const request = fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-API-Key': apiKey },
      body: text,
    })
      .then(async (response) => {
        await response.arrayBuffer();
        latenciesMs.push(performance.now() - due);
        if (!response.ok) {
          failed += 1;
          return;
        }
        readings += batch;
        jsonBytes += Buffer.byteLength(text);
      })
      .catch(() => {
        failed += 1;
      })
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  }
  await Promise.all(inFlight);
  return { readings, jsonBytes, failed, latenciesMs };
}
