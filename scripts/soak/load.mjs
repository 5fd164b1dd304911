// Steady load for the soak: a fixed number of batch requests per second, whatever the answers
// take, each reading with a value no other reading has, so the end check can count them in QuestDB.

/**
 * @typedef {object} LoadTotals
 * @property {number} answeredReadings  readings in requests answered 200
 * @property {number} valueSum          sum of the values of those readings
 * @property {number[]} refused        first values of requests answered other than 200 (none of theirs may be stored)
 * @property {number[]} unanswered     first values of requests without an answer (all or none of theirs stored)
 */

/**
 * Sends `requestsPerSecond` requests of `batch` readings to `url` until stopped. Latencies of the
 * answered requests are kept until `takeLatencies()` hands them over.
 * @param {{ url: string, apiKey: string, requestsPerSecond: number, batch: number }} options
 */
export function startLoad({ url, apiKey, requestsPerSecond, batch }) {
  /** @type {LoadTotals} */
  const totals = { answeredReadings: 0, valueSum: 0, refused: [], unanswered: [] };
  /** @type {number[]} */
  let latencies = [];
  let next = 0;
  let inFlight = 0;
  let stopped = false;
  const started = Date.now();
  // Readings carry times a microsecond apart from the start of the run: distinct rows in QuestDB.
  const baseMicros = BigInt(started) * 1000n;

  const send = async () => {
    const first = next;
    next += batch;
    const body = JSON.stringify(
      Array.from({ length: batch }, (_, i) => {
        const n = first + i;
        const micros = baseMicros + BigInt(n);
        const time = `${new Date(Number(micros / 1000n)).toISOString().slice(0, 23)}${String(micros % 1000n).padStart(3, '0')}Z`;
        return { time, ship_id: `soak-ship-${n % 16}`, cargo_id: `c${n % 4}`, value: n };
      }),
    );
    inFlight += 1;
    const t0 = performance.now();
    try {
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(30_000),
      });
      await response.arrayBuffer();
      latencies.push(performance.now() - t0);
      if (response.status === 200) {
        totals.answeredReadings += batch;
        // The sum of first..first+batch-1.
        totals.valueSum += batch * first + (batch * (batch - 1)) / 2;
      } else {
        totals.refused.push(first);
      }
    } catch {
      totals.unanswered.push(first);
    } finally {
      inFlight -= 1;
    }
  };

  const periodMs = 1000 / requestsPerSecond;
  let due = performance.now();
  const tick = () => {
    if (stopped) return;
    const now = performance.now();
    while (due <= now) {
      void send();
      due += periodMs;
    }
    setTimeout(tick, Math.max(1, due - performance.now()));
  };
  tick();

  return {
    totals,
    /** The latencies (ms) of the requests answered since the last call. */
    takeLatencies() {
      const taken = latencies;
      latencies = [];
      return taken;
    },
    /** Stops sending and waits for the requests in flight. */
    async stop() {
      stopped = true;
      while (inFlight > 0) await new Promise((r) => setTimeout(r, 20));
    },
  };
}
