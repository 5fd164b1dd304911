// Devices posting batches to a gateway until told to stop: the load of the outage, slow-QuestDB and
// fault runs. Every reading carries a distinct value and a distinct nanosecond of `date`, so after
// delivery stored rows = distinct values = accepted readings proves none was lost or doubled.

/**
 * @typedef {object} DeviceLoad
 * @property {number} accepted  readings answered 200
 * @property {number} refused   requests answered otherwise
 * @property {number} sent      readings sent; their values are 0 .. sent - 1
 * @property {() => Promise<void>} stop  resolves once every device's last request was answered
 */

/**
 * @param {{ url: string, apiKey: string, date: string, batchSize: number, devices?: number, pauseMs?: number }} options
 *   `date` is `YYYY-MM-DD`; `pauseMs` is each device's rest between requests.
 * @returns {DeviceLoad}
 */
export function startDevices({ url, apiKey, date, batchSize, devices = 4, pauseMs = 0 }) {
  let running = true;
  const load = { accepted: 0, refused: 0, sent: 0, stop };
  const device = async (/** @type {number} */ id) => {
    while (running) {
      const batch = Array.from({ length: batchSize }, () => {
        const n = load.sent++;
        return { time: `${date}T00:00:00.${String(n).padStart(9, '0')}Z`, ship_id: `device-${id}`, cargo_id: 'seq', value: n };
      });
      const response = await fetch(`${url}/api/v2/ingest/batch`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body: JSON.stringify(batch),
      });
      await response.arrayBuffer();
      if (response.status === 200) load.accepted += batch.length;
      else load.refused += 1;
      if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    }
  };
  const all = Promise.all(Array.from({ length: devices }, (_, id) => device(id)));
  async function stop() {
    running = false;
    await all;
  }
  return load;
}
