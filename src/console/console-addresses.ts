import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { isLoopback } from './request-facts.js';

/** Where devices and browsers reach the gateway over HTTPS, and what a technician must know about them. */
export interface GatewayAddresses {
  /** Hosts as a URL takes them (an IPv6 address in brackets). */
  hosts: string[];
  /** Set when no other machine can use them: the gateway listens on this machine only. */
  thisMachineOnly: boolean;
}

/** An IPv6 address in brackets, as a URL's host; names and IPv4 addresses as they are. */
export const urlHost = (host: string): string => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host);

export const httpsUrl = (host: string, port: number): string => `https://${urlHost(host)}:${port}`;

const unbracketed = (host: string): string => host.replace(/^\[|\]$/g, '');
const isLocal = (host: string): boolean => host === 'localhost' || isLoopback(unbracketed(host));

/**
 * The hosts that reach the gateway from the LAN. `listenHost` is `HOST`, what the servers are bound
 * to; `asked` the host the browser used. A name or address the browser reached it by works for
 * devices too; otherwise a gateway bound to one address is reached there alone, and one bound to
 * every address (0.0.0.0, ::) on the board's own addresses of that family.
 */
export function gatewayAddresses(
  listenHost: string,
  asked: string | undefined,
  interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces(),
): GatewayAddresses {
  const thisMachineOnly = isLocal(listenHost);
  if (asked !== undefined && !isLocal(asked)) return { hosts: [urlHost(asked)], thisMachineOnly };
  if (listenHost !== '0.0.0.0' && listenHost !== '::') return { hosts: [urlHost(listenHost)], thisMachineOnly };
  const families = listenHost === '::' ? ['IPv4', 'IPv6'] : ['IPv4'];
  const own = Object.values(interfaces)
    .flat()
    .filter((a): a is NetworkInterfaceInfo => a !== undefined && !a.internal && families.includes(a.family))
    // A link-local IPv6 address needs its interface named, which a device's URL cannot carry.
    .filter((a) => !(a.family === 'IPv6' && /^fe[89ab]/i.test(a.address)))
    .map((a) => urlHost(a.address));
  return { hosts: own.length > 0 ? own : [urlHost(asked ?? 'localhost')], thisMachineOnly };
}
