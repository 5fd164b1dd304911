import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** One detail of a refusal: where (`loc`), what (`msg`) and a stable machine-readable `type`. */
export interface ProblemDetail {
  loc: (string | number)[];
  msg: string;
  type: string;
}

/** Every refusal has the same JSON shape: what was wrong (`message`) and where (`details`). */
export interface ProblemBody {
  message: string;
  details: ProblemDetail[];
}

declare module 'hono' {
  interface ContextVariableMap {
    /** The refusal a request was answered with, for what watches refusals after the answer (the console). */
    problem: ProblemBody;
  }
}

export function problem(
  c: Context,
  status: ContentfulStatusCode,
  message: string,
  details: ProblemDetail[] = [],
  headers?: Record<string, string>,
): Response {
  const body: ProblemBody = { message, details };
  c.set('problem', body);
  return c.json<ProblemBody>(body, status, headers);
}

/** The same body as text, for refusals made before a request reaches the app (see `early-refusals.ts`). */
export function problemText(message: string, details: ProblemDetail[] = []): string {
  return JSON.stringify({ message, details } satisfies ProblemBody);
}
