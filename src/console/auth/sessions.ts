import { createHash, randomBytes } from 'node:crypto';

/** Logged-in browsers at once; a new login past this ends the least recently used session. */
export const MAX_SESSIONS = 32;
/** A session ends after this long without a request... */
export const IDLE_MS = 30 * 60_000;
/** ...and after this long in any case. */
export const LIFETIME_MS = 12 * 3_600_000;

export interface Session {
  /** The token every form of this session carries (synchroniser token against cross-site requests). */
  readonly csrf: string;
  readonly createdMs: number;
  lastUsedMs: number;
  /** What the session's last action did, for the next view of the page it names (shown once). */
  notice: { page: string; text: string } | undefined;
}

const newToken = (): string => randomBytes(32).toString('base64url');
/** Sessions are found by the SHA-256 of their cookie: what memory holds cannot be replayed as a cookie. */
const digestOf = (token: string): string => createHash('sha256').update(token, 'utf8').digest('base64url');

/** The console's sessions, in memory: a restart of the gateway logs everybody out. */
export class SessionStore {
  readonly #sessions = new Map<string, Session>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A new session; its token goes into the cookie and nowhere else. */
  create(): { token: string; session: Session } {
    const now = this.now();
    this.#expire(now);
    if (this.#sessions.size >= MAX_SESSIONS) this.#sessions.delete(this.#sessions.keys().next().value!);
    const token = newToken();
    const session: Session = { csrf: newToken(), createdMs: now, lastUsedMs: now, notice: undefined };
    this.#sessions.set(digestOf(token), session);
    return { token, session };
  }

  /** The live session of a cookie's token, refreshed; undefined when unknown, idle too long or too old. */
  find(token: string | undefined): Session | undefined {
    if (token === undefined || token === '') return undefined;
    const digest = digestOf(token);
    const session = this.#sessions.get(digest);
    if (session === undefined) return undefined;
    const now = this.now();
    if (expired(session, now)) {
      this.#sessions.delete(digest);
      return undefined;
    }
    session.lastUsedMs = now;
    // Re-inserted so the map stays in order of use and its first entry is the least recently used.
    this.#sessions.delete(digest);
    this.#sessions.set(digest, session);
    return session;
  }

  end(token: string | undefined): void {
    if (token !== undefined) this.#sessions.delete(digestOf(token));
  }

  get size(): number {
    return this.#sessions.size;
  }

  #expire(now: number): void {
    for (const [digest, session] of this.#sessions) if (expired(session, now)) this.#sessions.delete(digest);
  }
}

const expired = (session: Session, now: number): boolean => now - session.lastUsedMs > IDLE_MS || now - session.createdMs > LIFETIME_MS;
