import type { Result, Router } from 'hono/router';

/** The methods whose matches are remembered: a client may send any token as a method. */
const REMEMBERED_METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH']);

/**
 * Remembers what another router matched for each path registered without parameters or wildcards
 * (the ingest endpoints devices post to all day), so the inner router's search runs once for each
 * such path and method instead of once a request. Any other path is matched by the inner router
 * each time, so what is held is bounded by the routes, not by what clients send. A match result
 * is only ever read by Hono, so one result may serve every request of its path.
 */
export class StaticPathRouter<T> implements Router<T> {
  readonly name: string;
  readonly #inner: Router<T>;
  /** For each path registered without parameters or wildcards, what each method matched so far. */
  readonly #matched = new Map<string, Map<string, Result<T>>>();

  constructor(inner: Router<T>) {
    this.#inner = inner;
    this.name = `${inner.name}, static paths remembered`;
  }

  add(method: string, path: string, handler: T): void {
    this.#inner.add(method, path, handler);
    // A route added later may match a remembered path too.
    for (const byMethod of this.#matched.values()) byMethod.clear();
    if (!path.includes(':') && !path.includes('*') && !this.#matched.has(path)) this.#matched.set(path, new Map());
  }

  match(method: string, path: string): Result<T> {
    const byMethod = this.#matched.get(path);
    if (byMethod === undefined) return this.#inner.match(method, path);
    let result = byMethod.get(method);
    if (result === undefined) {
      result = this.#inner.match(method, path);
      if (REMEMBERED_METHODS.has(method)) byMethod.set(method, result);
    }
    return result;
  }
}
