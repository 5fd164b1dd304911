import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createPowercutDisk } from '../scripts/lib/powercut-fs.mjs';
import { hashKey } from '../src/keys/key-hash.js';
import { readKeyFile, writeKeyFile } from '../src/keys/key-file.js';
import { QueueWriter } from '../src/queue/queue-writer.js';
import { loadServerCertificate } from '../src/tls/certificate-store.js';

// The gateway's own files on a disk that loses, at a power cut, every change not made durable:
// what it has said is written must survive, including the names of the files and directories it
// made (a directory's new entries are durable only once the directory itself is fsynced).

type Disk = Awaited<ReturnType<typeof createPowercutDisk>>;
type PowercutMount = Awaited<ReturnType<Disk['mount']>>;
let disk: Disk | undefined;

afterEach(async () => {
  await disk?.remove();
  disk = undefined;
});

const DATA_DIR = join('site', 'data');

/**
 * Appends a reading to a queue in DATA_DIR on the mount (made there if missing), cuts the power
 * once the append is answered, mounts again and counts the readings the queue holds.
 */
async function readingsAfterACut(d: Disk, fs: PowercutMount): Promise<number> {
  const queue = QueueWriter.open({ dataDir: join(fs.mountPoint, DATA_DIR), durability: 'power-loss', maxBytes: 1 << 20 });
  await queue.append('1\tship\tcargo\t1', 1, 1);
  await fs.cut();
  queue.close();
  await fs.unmount();
  const again = await d.mount();
  const reopened = QueueWriter.open({ dataDir: join(again.mountPoint, DATA_DIR), durability: 'power-loss', maxBytes: 1 << 20 });
  try {
    return reopened.stats().readings;
  } finally {
    reopened.close();
  }
}

describe('the gateway’s files through a power cut', () => {
  it('keeps a reading answered into a data directory the queue made on its first start', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    expect(await readingsAfterACut(disk, fs)).toBe(1);
  });

  it('keeps a reading answered into a data directory the self-signed certificate made first, as a start does', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    loadServerCertificate({
      certFile: undefined,
      keyFile: undefined,
      credentialsDirectory: undefined,
      dataDir: join(fs.mountPoint, DATA_DIR),
    });
    expect(await readingsAfterACut(disk, fs)).toBe(1);
    expect(existsSync(join(disk.backing, DATA_DIR, 'tls', 'cert.pem'))).toBe(true);
  });

  it('keeps a reading answered into a data directory made before without an fsync, as a failed start or a command leaves it', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    mkdirSync(join(fs.mountPoint, DATA_DIR), { recursive: true });
    expect(await readingsAfterACut(disk, fs)).toBe(1);
  });

  it('removes the data directory it made when the fsync naming it fails, so the next start makes it anew', async () => {
    disk = await createPowercutDisk({ fsyncEio: 1 });
    const fs = await disk.mount();
    const dataDir = join(fs.mountPoint, DATA_DIR);
    expect(() => QueueWriter.open({ dataDir, durability: 'power-loss', maxBytes: 1 << 20 })).toThrow(/EIO/);
    expect(existsSync(join(fs.mountPoint, 'site'))).toBe(false);
    expect(() => loadServerCertificate({ certFile: undefined, keyFile: undefined, credentialsDirectory: undefined, dataDir })).toThrow(
      /EIO/,
    );
    expect(existsSync(join(fs.mountPoint, 'site'))).toBe(false);
  });

  it('keeps a device key once the key file is written', async () => {
    disk = await createPowercutDisk();
    const fs = await disk.mount();
    writeKeyFile(join(fs.mountPoint, 'api-keys'), [{ name: 'pump-7', hash: hashKey('a-device-key-0123456789') }]);

    await fs.cut();
    await fs.unmount();

    expect(readKeyFile(join(disk.backing, 'api-keys')).entries.map((entry) => entry.name)).toEqual(['pump-7']);
  });
});
