/**
 * The host an address belongs to, the unit one client is counted in (login attempts, unproven
 * connections): an IPv4 address (also written as IPv4-mapped IPv6), or the /64 of an IPv6 address,
 * as one IPv6 host is given a whole /64.
 */
export function hostOf(address: string): string {
  const zone = address.indexOf('%');
  const bare = (zone < 0 ? address : address.slice(0, zone)).toLowerCase();
  if (!bare.includes(':')) return bare;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare);
  if (mapped !== null) return mapped[1]!;
  const groups = expandIpv6(bare);
  return groups === undefined ? bare : `${groups.slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address, without leading zeros; undefined when it is none. */
function expandIpv6(address: string): string[] | undefined {
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const part = (text: string | undefined): string[] => (text === undefined || text === '' ? [] : text.split(':'));
  const head = part(halves[0]);
  const tail = part(halves[1]);
  // An embedded IPv4 tail (::ffff:… was taken above; 64:ff9b::1.2.3.4 and the like) is two groups.
  const last = tail.at(-1) ?? head.at(-1);
  if (last?.includes('.')) {
    const octets = last.split('.').map(Number);
    const groups = [((octets[0] ?? 0) << 8) | (octets[1] ?? 0), ((octets[2] ?? 0) << 8) | (octets[3] ?? 0)].map((n) => n.toString(16));
    (tail.length > 0 ? tail : head).splice(-1, 1, ...groups);
  }
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 0) return undefined;
  const groups = [...head, ...new Array<string>(halves.length === 1 ? 0 : missing).fill('0'), ...tail];
  if (!groups.every((g) => /^[0-9a-f]{1,4}$/.test(g))) return undefined;
  return groups.map((g) => g.replace(/^0+(?=.)/, ''));
}

/** Whether a host (as `hostOf` names it) is this machine's loopback: 127.0.0.0/8, or the /64 of ::1. */
export function isLoopbackHost(host: string): boolean {
  return host.startsWith('127.') || host === '0:0:0:0::/64';
}
