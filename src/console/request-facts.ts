import type { Context } from 'hono';

interface Incoming {
  incoming?: { socket?: { remoteAddress?: string; encrypted?: boolean } };
}

const socketOf = (c: Context) => (c.env as Incoming | undefined)?.incoming?.socket;

/** The peer address of the connection; forwarding headers are not trusted. */
export const peerAddress = (c: Context): string => socketOf(c)?.remoteAddress ?? 'unknown';

/** True when the request came over TLS (the HTTPS port, or TLS on the plain port). */
export const isEncrypted = (c: Context): boolean => socketOf(c)?.encrypted === true;

/** 127.0.0.0/8 and ::1, also as IPv4-mapped IPv6 addresses. */
export function isLoopback(address: string): boolean {
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4.startsWith('127.') || address === '::1';
}

/** The host name the client used to reach the gateway (from the Host header or the URL, without the port), or undefined. */
export function requestHostname(c: Context): string | undefined {
  const host = c.req.header('host');
  try {
    const name = host === undefined || host === '' ? new URL(c.req.url).hostname : new URL(`http://${host}`).hostname;
    return name === '' ? undefined : name;
  } catch {
    return undefined;
  }
}
