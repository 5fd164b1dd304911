// What the emulated-board tests ask of the gateway and QuestDB on the board, through forwarded ports.
import { readFileSync } from 'node:fs';
import { Agent, FormData, fetch as undiciFetch } from 'undici';

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

/**
 * Readings of a run are timed from an hour before it started, one millisecond apart: within the
 * gateway's accepted range (docs/reading-times.md) whenever the test runs.
 */
const FIRST_READING_MS = Date.now() - 3_600_000;

/** The reading with value n: its own time, so no two are merged by QuestDB's deduplication. */
export const reading = (/** @type {number} */ n, ship = 'vm-test') => ({
  time: new Date(FIRST_READING_MS + n).toISOString(),
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

/** How long the board's QuestDB may take to listen after a boot: its JVM starts slowly under emulation. */
const QUESTDB_START_MS = 10 * 60_000;

/**
 * Rows of a ship in the board's QuestDB, and which of the given values are missing. A QuestDB not
 * listening yet (the gateway is ready before it after a boot) is asked again until QUESTDB_START_MS.
 * @param {{ port: number, password: string, values: Set<number>, ship?: string }} options
 */
export async function questdbCount({ port, password, values, ship = 'vm-test' }) {
  const deadline = Date.now() + QUESTDB_START_MS;
  const query = async (/** @type {string} */ sql) => {
    for (;;) {
      /** @type {Response} */
      let response;
      try {
        response = await fetch(`http://127.0.0.1:${port}/exec?query=${encodeURIComponent(sql)}`, {
          headers: { Authorization: `Basic ${Buffer.from(`admin:${password}`).toString('base64')}` },
          signal: AbortSignal.timeout(60_000),
        });
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 5000));
        continue;
      }
      if (!response.ok) throw new Error(`QuestDB answered ${response.status}: ${await response.text()}`);
      return /** @type {{ dataset: unknown[][] }} */ (await response.json()).dataset;
    }
  };
  // QuestDB's count_distinct takes no DOUBLE: the distinct values are counted here.
  const present = (await query(`select value from cargo_data where ship_id = '${ship}'`)).map(([value]) => Number(value));
  const distinct = new Set(present);
  const missing = [...values].filter((n) => !distinct.has(n));
  return { rows: present.length, distinct: distinct.size, missing };
}

/**
 * The local console on the board's HTTPS port, as a technician's browser uses it: log in with the
 * console password, read pages, send forms with the session's token and this origin.
 * @param {string} base  https://127.0.0.1:<forwarded 443>
 */
export function consoleSession(base) {
  const insecure = new Agent({ connect: { rejectUnauthorized: false } });
  /** @type {Map<string, string>} */
  const cookies = new Map();
  let csrf = '';
  /**
   * @param {string} path
   * @param {{ method?: string, body?: URLSearchParams | FormData, timeoutMs?: number }} [init]
   */
  const request = async (path, init = {}) => {
    /** @type {Record<string, string>} */
    const headers = { origin: base };
    if (cookies.size > 0) headers['cookie'] = [...cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await undiciFetch(`${base}${path}`, {
      method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
      headers,
      body: init.body,
      redirect: 'manual',
      dispatcher: insecure,
      signal: AbortSignal.timeout(init.timeoutMs ?? 120_000),
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [name = '', value = ''] = (cookie.split(';')[0] ?? '').split('=');
      if (value === '' || /Max-Age=0/i.test(cookie)) cookies.delete(name);
      else cookies.set(name, value);
    }
    const html = await response.text();
    csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? csrf;
    return { status: response.status, html, location: response.headers.get('location') };
  };
  return {
    request,
    /** Logs in; the answer to the login form (303 to the console when the password is right). */
    async login(/** @type {string} */ password) {
      const page = await request('/console/login');
      const token = /name="_login" value="([^"]+)"/.exec(page.html)?.[1] ?? '';
      return request('/console/login', {
        body: new URLSearchParams([
          ['_login', token],
          ['password', password],
          ['next', '/console/'],
        ]),
      });
    },
    /** Sends a form of the session's pages (its token added), as the browser does. */
    async post(/** @type {string} */ path, /** @type {Record<string, string>} */ fields) {
      return request(path, { body: new URLSearchParams({ _csrf: csrf, ...fields }) });
    },
    /** Uploads a file as the Certificate and settings page's update form does. */
    async uploadBundle(/** @type {string} */ file) {
      const form = new FormData();
      form.set('_csrf', csrf);
      form.set('bundle', new Blob([readFileSync(file)]), 'harbor-update.raucb');
      return request(`/console/update?_csrf=${encodeURIComponent(csrf)}`, { body: form, timeoutMs: 15 * 60_000 });
    },
  };
}
