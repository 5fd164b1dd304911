import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { RequestError } from '@hono/node-server';
import { type ProblemDetail, problemText } from './problem-details.js';

/**
 * Refusals made before a request reaches the app, with the problem-details body every other
 * refusal has: what Node's HTTP parser rejects, and what @hono/node-server cannot make a request of.
 * Left to themselves both answer a bare status line.
 */

/** Hosts a request without `Host` is routed as: HTTP/1.0 does not require the header. */
export const HOST_OF_HOSTLESS_REQUESTS = 'localhost';

interface Refusal {
  status: number;
  reason: string;
  message: string;
  detail: ProblemDetail;
}

/** What Node's HTTP parser reports, answered with the status Node itself would send. */
const REFUSALS: ReadonlyMap<string, Refusal> = new Map(
  Object.entries({
    HPE_HEADER_OVERFLOW: {
      status: 431,
      reason: 'Request Header Fields Too Large',
      message: 'Request headers too large',
      detail: { loc: ['header'], msg: 'The request headers exceed 16 KiB', type: 'headers_too_large' },
    },
    HPE_CHUNK_EXTENSIONS_OVERFLOW: {
      status: 413,
      reason: 'Payload Too Large',
      message: 'Chunk extensions too large',
      detail: { loc: ['body'], msg: 'The chunk extensions exceed what the parser keeps', type: 'too_large' },
    },
    ERR_HTTP_REQUEST_TIMEOUT: {
      status: 408,
      reason: 'Request Timeout',
      message: 'Request not received in time',
      detail: { loc: ['request'], msg: 'The headers or the body did not arrive within the time allowed', type: 'timeout' },
    },
  }),
);

function refusalOf(error: NodeJS.ErrnoException): Refusal {
  return (
    REFUSALS.get(error.code ?? '') ?? {
      status: 400,
      reason: 'Bad Request',
      message: 'Malformed HTTP request',
      detail: { loc: ['request'], msg: String((error as { reason?: string }).reason ?? error.code ?? 'parse error'), type: 'http_invalid' },
    }
  );
}

/**
 * The servers' `clientError` handler: answers as Node would (same status, then close), with a
 * problem-details body. Nothing is written once a response has begun or the peer is gone.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
  if (error.code !== 'ECONNRESET' && socket.writable && inFlight?.headersSent !== true) {
    const { status, reason, message, detail } = refusalOf(error);
    const body = problemText(message, [detail]);
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/**
 * HTTP/1.1 requires `Host` (RFC 9112 §3.2) and is refused without it, as Node would; HTTP/1.0
 * does not, and hand-written modem and AT-command clients leave it out, so it is served.
 * Returns true when the request was answered here.
 */
export function refuseHostlessHttp11(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.headers.host !== undefined || req.httpVersion !== '1.1') return false;
  const body = problemText('Missing Host header', [{ loc: ['header', 'host'], msg: 'HTTP/1.1 requires a Host header', type: 'missing' }]);
  res.writeHead(400, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Connection: 'close' }).end(body);
  return true;
}

/** Too many requests without a device key are waiting for their turn (keyless-lane.ts): 503 at once. */
export function refuseLaneFull(res: ServerResponse): void {
  const body = problemText('Too many requests waiting', [
    { loc: ['request'], msg: 'The gateway is answering many requests without a device key; try again in a second', type: 'busy' },
  ]);
  res.writeHead(503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Retry-After': '1' }).end(body);
}

/**
 * What @hono/node-server could not make a request of (an invalid Host header or URL): 400 with its
 * reason. Anything else that reaches here escaped the app's own error handler: 500, no internals.
 */
export function requestErrorResponse(error: unknown): Response {
  const body =
    error instanceof RequestError
      ? problemText('Bad request', [{ loc: ['request'], msg: error.message, type: 'http_invalid' }])
      : problemText('Internal server error');
  return new Response(body, { status: error instanceof RequestError ? 400 : 500, headers: { 'Content-Type': 'application/json' } });
}
