import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

const ESTABLISHED = '01';

/**
 * Established TCP connections of process `pid` to `port` on this machine, as the kernel sees them
 * now (/proc), so a busy test process cannot count a connection the gateway has already closed.
 */
export function connectionsTo(pid: number, port: number): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // The descriptor closed while we listed them.
    }
  }
  const remotePort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let count = 0;
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length > 9 && fields[2]!.endsWith(remotePort) && fields[3] === ESTABLISHED && inodes.has(fields[9]!)) count += 1;
    }
  }
  return count;
}
