/** Addresses remembered for wrong keys; past this the one that failed least recently is forgotten. */
const MAX_ADDRESSES = 256;
/** Key names remembered (revoked keys stay listed until this many are known). */
const MAX_KEYS = 1000;
/** The refusal message kept per key is cut here: it names ships and fields, not whole bodies. */
const MAX_MESSAGE = 300;

export interface KeyRefusals {
  key: string;
  /** 403: ships the key may not send. */
  forbidden: number;
  /** 422: readings the schema refused. */
  invalid: number;
  /** Any other refusal (400, 413, 503, ...). */
  other: number;
  last: { atMs: number; status: number; message: string } | undefined;
}

export interface WrongKeyAddress {
  address: string;
  /** Requests without any key, and with a key that matched none. */
  missing: number;
  wrong: number;
  lastMs: number;
}

export interface Refusal {
  status: number;
  /** The key the request authenticated with; undefined for a wrong or missing key. */
  key: string | undefined;
  address: string;
  message: string | undefined;
  /** A missing `X-API-Key` rather than a wrong one (401 only). */
  missingKey: boolean;
}

/**
 * Refused ingest requests, so a technician sees a misconfigured device at once: by key (403, 422,
 * others, with the latest reason) and, for wrong or missing keys, by client address. Fed only
 * after a request has been answered with an error: accepted requests never reach it.
 */
export class RefusalTable {
  /** Every refused ingest request by HTTP status, for `/metrics`. */
  readonly byStatus = new Map<number, number>();
  readonly #keys = new Map<string, KeyRefusals>();
  readonly #addresses = new Map<string, WrongKeyAddress>();

  record(refusal: Refusal, now: number): void {
    this.byStatus.set(refusal.status, (this.byStatus.get(refusal.status) ?? 0) + 1);
    if (refusal.status === 401) this.#wrongKey(refusal, now);
    else if (refusal.key !== undefined) this.#byKey(refusal, now);
  }

  /** Every refused API request by status, lowest status first: what `/metrics` counts besides the 200s. */
  byStatusSorted(): [status: number, count: number][] {
    return [...this.byStatus].sort((a, b) => a[0] - b[0]);
  }

  keys(): KeyRefusals[] {
    return [...this.#keys.values()].map((k) => ({ ...k })).sort((a, b) => (b.last?.atMs ?? 0) - (a.last?.atMs ?? 0));
  }

  /** Addresses that sent wrong or missing keys, most recent first. */
  wrongKeys(): WrongKeyAddress[] {
    return [...this.#addresses.values()].map((a) => ({ ...a })).sort((a, b) => b.lastMs - a.lastMs);
  }

  #byKey(refusal: Refusal, now: number): void {
    const name = refusal.key!;
    let entry = this.#keys.get(name);
    if (entry === undefined) {
      if (this.#keys.size >= MAX_KEYS) this.#keys.delete(this.#keys.keys().next().value!);
      entry = { key: name, forbidden: 0, invalid: 0, other: 0, last: undefined };
      this.#keys.set(name, entry);
    }
    if (refusal.status === 403) entry.forbidden += 1;
    else if (refusal.status === 422) entry.invalid += 1;
    else entry.other += 1;
    entry.last = { atMs: now, status: refusal.status, message: (refusal.message ?? '').slice(0, MAX_MESSAGE) };
  }

  #wrongKey(refusal: Refusal, now: number): void {
    let entry = this.#addresses.get(refusal.address);
    // Re-inserted on every failure, so the map stays in order of last failure and its first entry is the one to forget.
    if (entry !== undefined) this.#addresses.delete(refusal.address);
    else entry = { address: refusal.address, missing: 0, wrong: 0, lastMs: now };
    if (refusal.missingKey) entry.missing += 1;
    else entry.wrong += 1;
    entry.lastMs = now;
    this.#addresses.set(refusal.address, entry);
    if (this.#addresses.size > MAX_ADDRESSES) this.#addresses.delete(this.#addresses.keys().next().value!);
  }
}
