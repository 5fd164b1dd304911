import { existsSync, readFileSync } from 'node:fs';
import type { Dispatcher } from 'undici';
import { Agent, ProxyAgent } from '../../questdb/undici-dispatchers.js';

/** Where distributions keep the system's CA bundle (Debian/Ubuntu, Fedora/RHEL, Alpine/macOS). */
const SYSTEM_CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem'];

export interface ConnectionOptions {
  caFile: string | undefined;
  proxy: string | undefined;
  timeoutMs: number;
}

/**
 * The CAs an HTTPS upstream must chain to: the configured file, else the system's bundle (so a CA
 * the operator added with the system's tools counts), else undefined (Node's built-in list).
 */
export function trustedCas(caFile: string | undefined, bundles: readonly string[] = SYSTEM_CA_BUNDLES): string | undefined {
  if (caFile !== undefined) return readFileSync(caFile, 'utf8');
  const bundle = bundles.find((path) => existsSync(path));
  return bundle === undefined ? undefined : readFileSync(bundle, 'utf8');
}

/**
 * The connections to the upstream: direct, or through an HTTP proxy, which tunnels `https://`
 * destinations with CONNECT (TLS stays end to end) and forwards `http://` requests as they are.
 */
export function upstreamDispatcher(options: ConnectionOptions): Dispatcher {
  const ca = trustedCas(options.caFile);
  const tls = ca === undefined ? {} : { ca };
  const common = { connections: 2, keepAliveTimeout: 10_000, headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs };
  if (options.proxy === undefined) return new Agent({ ...common, connect: { ...tls, timeout: options.timeoutMs } });
  return new ProxyAgent({
    ...common,
    uri: options.proxy,
    proxyTunnel: false,
    proxyTls: { timeout: options.timeoutMs },
    requestTls: { ...tls, timeout: options.timeoutMs },
  });
}
