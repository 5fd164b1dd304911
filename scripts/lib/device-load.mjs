// Devices posting batches to a gateway until told to stop: the load of the outage, slow-QuestDB and
// fault runs. Every reading carries a distinct value and a distinct nanosecond of `date`, so after
// delivery stored rows = distinct values = accepted readings proves none was lost or doubled.

/**
 * @typedef {object} DeviceLoad
 * @property {number} accepted  readings answered 200
 * @property {number} refused   requests answered otherwise
 * @property {number} sent      readings sent; their values are 0 .. sent - 1
 * @property {number} resent    requests sent again after no answer came (the connection closed)
 * @property {() => Promise<void>} stop  resolves once every device's last request was answered
 */

const RESEND_AFTER_MS = 100;
const MAX_SENDS = 10;

/**
 * @param {{ url: string, apiKey: string, date: string, batchSize: number, devices?: number, pauseMs?: number }} options
 *   `date` is `YYYY-MM-DD`; `pauseMs` is each device's rest between requests.
 * @returns {DeviceLoad}
 */
export function startDevices({ url, apiKey, date, batchSize, devices = 4, pauseMs = 0 }) {
  let running = true;
  const load = { accepted: 0, refused: 0, sent: 0, resent: 0, stop };
  /**
   * Posts a batch until an answer comes, as devices' SDKs do on a network error: a keep-alive
   * connection the gateway closed as the request went out (a busy machine delays a device past the
   * idle timeout) gets no answer. The same readings again land on the same keys.
   * @param {string} body
   */
  const post = async (body) => {
    for (let sends = 1; ; sends++) {
      try {
        const response = await fetch(`${url}/api/v2/ingest/batch`, {
          method: 'POST',
          headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
          body,
        });
        await response.arrayBuffer();
        return response.status;
      } catch (error) {
        if (sends >= MAX_SENDS) throw error;
        load.resent += 1;
        await new Promise((r) => setTimeout(r, RESEND_AFTER_MS));
      }
    }
  };
  const device = async (/** @type {number} */ id) => {
    while (running) {
      const batch = Array.from({ length: batchSize }, () => {
        const n = load.sent++;
        return { time: `${date}T00:00:00.${String(n).padStart(9, '0')}Z`, ship_id: `device-${id}`, cargo_id: 'seq', value: n };
      });
      const status = await post(JSON.stringify(batch));
      if (status === 200) load.accepted += batch.length;
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
