import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const meaningful = (value: string | undefined): string | undefined =>
  value === undefined || value === '' || /^0+$/.test(value) ? undefined : value;

/**
 * Where a board's identity is read, best first, under the file system's root. A Raspberry Pi's
 * serial (device tree, or /proc/cpuinfo on older kernels) belongs to the board itself, so a card
 * cloned into another board tells; /etc/machine-id is made on a system's first boot and copied with
 * its card, so it tells a clone only where the clone's system made a new one (a server, a virtual
 * machine set up anew).
 */
const SOURCES: readonly { path: string; read: (text: string) => string | undefined }[] = [
  // NUL-terminated in the device tree.
  { path: 'sys/firmware/devicetree/base/serial-number', read: (text) => meaningful(text.replaceAll('\0', '').trim().toLowerCase()) },
  { path: 'proc/cpuinfo', read: (text) => meaningful(/^Serial\s*:\s*([0-9a-fA-F]+)\s*$/m.exec(text)?.[1]?.toLowerCase()) },
  { path: 'etc/machine-id', read: (text) => meaningful(text.trim().toLowerCase()) },
];

/** The board this process runs on: the first source that names it, and a hash of what it read (the serial itself is not kept). */
export interface Board {
  source: string;
  hash: string;
}

/** The board as its first readable source names it; undefined where none does (a container without a machine id). */
export function readBoard(root = '/'): Board | undefined {
  for (const source of SOURCES) {
    let text: string;
    try {
      text = readFileSync(join(root, source.path), 'latin1');
    } catch {
      continue;
    }
    const value = source.read(text);
    if (value === undefined) continue;
    const hash = createHash('sha256').update(`harbor-gateway board\n${source.path}\n${value}`).digest('hex').slice(0, 32);
    return { source: `/${source.path}`, hash };
  }
  return undefined;
}
