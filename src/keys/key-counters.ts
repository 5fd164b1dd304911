/** What one key did since the gateway started, for `/status` and the `gateway_key_health` table. */
export interface KeyCounters {
  name: string;
  shipPrefix: string | null;
  acceptedRequests: number;
  acceptedReadings: number;
  refusedRequests: number;
  /** Last request made with the key, ISO 8601; null when never used since start. */
  lastSeen: string | null;
}

/** The counters as kept: the last request's time as a number, written out only when listed. */
type KeptCounters = Omit<KeyCounters, 'lastSeen'> & { lastSeenMs: number | null };

export class KeyCounterTable {
  readonly #counters = new Map<string, KeptCounters>();

  /** Keeps the counters of keys that still exist, adds new keys, forgets revoked ones. */
  sync(keys: readonly { name: string; shipPrefix?: string }[]): void {
    const names = new Set(keys.map((k) => k.name));
    for (const name of this.#counters.keys()) if (!names.has(name)) this.#counters.delete(name);
    for (const key of keys) {
      const counters = this.#counters.get(key.name);
      if (counters === undefined) {
        this.#counters.set(key.name, {
          name: key.name,
          shipPrefix: key.shipPrefix ?? null,
          acceptedRequests: 0,
          acceptedReadings: 0,
          refusedRequests: 0,
          lastSeenMs: null,
        });
      } else {
        counters.shipPrefix = key.shipPrefix ?? null;
      }
    }
  }

  /** On every request with the key: a number stored, so the request formats no date. */
  seen(name: string, now = Date.now()): void {
    const counters = this.#counters.get(name);
    if (counters !== undefined) counters.lastSeenMs = now;
  }

  accepted(name: string, readings: number): void {
    const counters = this.#counters.get(name);
    if (counters === undefined) return;
    counters.acceptedRequests += 1;
    counters.acceptedReadings += readings;
  }

  refused(name: string): void {
    const counters = this.#counters.get(name);
    if (counters !== undefined) counters.refusedRequests += 1;
  }

  list(): KeyCounters[] {
    return [...this.#counters.values()].map(({ lastSeenMs, ...c }) => ({
      ...c,
      lastSeen: lastSeenMs === null ? null : new Date(lastSeenMs).toISOString(),
    }));
  }
}
