// What the emulated-board tests ask of the gateway and QuestDB on the board, through forwarded ports.

/**
 * @typedef {{ version: string, ready: boolean, clockSynchronized: boolean | null,
 *   queue: { readings: number, maxBytes: number }, tls: { fingerprintSha256: string } | null,
 *   totals: { acceptedReadings: number, flushedReadings: number },
 *   sinks: { name: string, destination: string, delivered?: number }[],
 *   keys: { name: string, acceptedReadings?: number }[] }} Status
 */

/** /status with the key. @returns {Promise<Status>} */
export async function gatewayStatus(/** @type {string} */ url, /** @type {string} */ apiKey) {
  const response = await fetch(`${url}/status`, { headers: { 'X-API-Key': apiKey }, signal: AbortSignal.timeout(20_000) });
  if (response.status !== 200) throw new Error(`/status answered ${response.status}: ${await response.text()}`);
  return /** @type {Promise<Status>} */ (response.json());
}

/** The reading with value n: its own time, so no two are merged by QuestDB's deduplication. */
export const reading = (/** @type {number} */ n, ship = 'vm-test') => ({
  time: new Date(Date.UTC(2026, 10, 1) + n).toISOString(),
  ship_id: ship,
  cargo_id: 'value',
  value: n,
});

/**
 * Posts batches of 50 readings with values from..from+count-1 and records each answered one.
 * With stopOnError the first failed request ends it (a power cut); otherwise it throws.
 * @param {{ url: string, apiKey: string, from: number, count: number, answered: Set<number>, stopOnError?: boolean, ship?: string }} options
 * @returns {Promise<number>} the next value
 */
export async function postReadings({ url, apiKey, from, count, answered, stopOnError = false, ship }) {
  let next = from;
  while (next < from + count) {
    const values = Array.from({ length: Math.min(50, from + count - next) }, (_, i) => next + i);
    try {
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'X-API-Key': apiKey, 'Content-Type': 'application/json' },
        body: JSON.stringify(values.map((n) => reading(n, ship))),
        signal: AbortSignal.timeout(60_000),
      });
      if (response.status !== 200) throw new Error(`batch answered ${response.status}: ${await response.text()}`);
      for (const n of values) answered.add(n);
    } catch (error) {
      if (stopOnError) return next + values.length;
      throw error;
    }
    next += values.length;
  }
  return next;
}

/**
 * Rows of a ship in the board's QuestDB, and which of the given values are missing.
 * @param {{ port: number, password: string, values: Set<number>, ship?: string }} options
 */
export async function questdbCount({ port, password, values, ship = 'vm-test' }) {
  const query = async (/** @type {string} */ sql) => {
    const response = await fetch(`http://127.0.0.1:${port}/exec?query=${encodeURIComponent(sql)}`, {
      headers: { Authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}` },
      signal: AbortSignal.timeout(60_000),
    });
    if (!response.ok) throw new Error(`QuestDB answered ${response.status}: ${await response.text()}`);
    return /** @type {{ dataset: unknown[][] }} */ (await response.json()).dataset;
  };
  const [[rows, distinct] = []] = await query(`select count(), count_distinct(value) from cargo_data where ship_id = '${ship}'`);
  const present = new Set((await query(`select value from cargo_data where ship_id = '${ship}'`)).map(([value]) => Number(value)));
  const missing = [...values].filter((n) => !present.has(n));
  return { rows: Number(rows), distinct: Number(distinct), missing };
}
