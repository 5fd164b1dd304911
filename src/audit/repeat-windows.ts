import { type AuditEntry, type AuditInput, entryOf } from './audit-entry.js';

/** Origins counted apart at once; others share one window. */
export const MAX_WINDOWS = 256;
/** The origin of the shared window. */
export const OTHER_ORIGINS = '(other addresses)';

interface Window {
  input: AuditInput;
  count: number;
  firstMs: number;
  lastMs: number;
  closesMs: number;
}

/**
 * Refused and throttled logins, gathered per origin: the first of a quiet origin is an entry at once,
 * those that follow within `windowMs` one entry with their count when the window closes. A flood
 * of refusals from one address is then at most two entries per window, and from any number of
 * addresses at most two per window for each of MAX_WINDOWS of them plus one for the rest.
 */
export class RepeatWindows {
  readonly #open = new Map<string, Window>();

  constructor(private readonly windowMs: number) {}

  /** Counts an occurrence; returns the entry to keep now when it opened a window, else undefined. */
  add(input: AuditInput, nowMs: number): AuditEntry | undefined {
    let key = windowKey(input);
    let window = this.#open.get(key);
    if (window === undefined && this.#open.size >= MAX_WINDOWS) {
      input = { ...input, origin: OTHER_ORIGINS };
      key = windowKey(input);
      window = this.#open.get(key);
    }
    if (window !== undefined) {
      window.count += 1;
      if (window.count === 1) window.firstMs = nowMs;
      window.lastMs = nowMs;
      return undefined;
    }
    this.#open.set(key, { input, count: 0, firstMs: nowMs, lastMs: nowMs, closesMs: nowMs + this.windowMs });
    return entryOf(input, nowMs);
  }

  /** The entries of the windows closed by `nowMs` (those that saw more than their first); `Infinity` closes all. */
  close(nowMs: number): AuditEntry[] {
    const closed: AuditEntry[] = [];
    for (const [key, window] of this.#open) {
      if (window.closesMs > nowMs) continue;
      this.#open.delete(key);
      if (window.count > 0) closed.push(entryOf(window.input, window.lastMs, window.count, window.firstMs));
    }
    return closed;
  }

  /** What the open windows hold so far, for a page that shows the trail as it is now. */
  pending(): AuditEntry[] {
    return [...this.#open.values()].filter((w) => w.count > 0).map((w) => entryOf(w.input, w.lastMs, w.count, w.firstMs));
  }

  get size(): number {
    return this.#open.size;
  }
}

const windowKey = (input: AuditInput): string => `${input.action}\0${input.outcome}\0${input.origin ?? ''}`;
