import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { ProblemDetail } from '../reading/problems.js';

/** Every refusal has the same JSON shape: what was wrong (`message`) and where (`details`). */
export interface ProblemBody {
  message: string;
  details: ProblemDetail[];
}

export function problem(
  c: Context,
  status: ContentfulStatusCode,
  message: string,
  details: ProblemDetail[] = [],
  headers?: Record<string, string>,
): Response {
  return c.json<ProblemBody>({ message, details }, status, headers);
}
