import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { GATEWAY_NODE_OPTIONS } from '../scripts/lib/node-options.mjs';
import { createPowercutDisk } from '../scripts/lib/powercut-fs.mjs';
import { TEST_KEY } from './support/gateway.js';
import { gatewayEnv, spawnGateway } from './support/process.js';
import { waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const run = promisify(execFile);

/** Settings of a gateway that needs no QuestDB (it queues what it gets). */
const offlineEnv = (dataDir: string): Record<string, string> => ({
  API_KEY: TEST_KEY,
  DATA_DIR: dataDir,
  HOST: '127.0.0.1',
  PORT: '0',
  HTTPS_PORT: '0',
  QUESTDB_URL: 'http://127.0.0.1:9',
  HEALTH_REPORT: 'false',
  LOG_LEVEL: 'info',
  NODE_OPTIONS: GATEWAY_NODE_OPTIONS,
  PATH: process.env['PATH'] ?? '',
});

/** `serve` of the built bundle until it exits by itself: its status and standard error. */
async function serveUntilExit(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  try {
    await run(process.execPath, [inject('bundlePath'), 'serve'], { env, timeout: 20_000 });
    return { code: 0, stderr: '' };
  } catch (error) {
    const failed = error as { code: number; stderr: string };
    return { code: failed.code, stderr: failed.stderr };
  }
}

const post = (url: string, body: unknown) =>
  fetch(`${url}/api/v2/ingest/batch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': TEST_KEY },
    body: JSON.stringify(body),
  });

describe('DATA_DIR as the file system resolves it', () => {
  it('follows a symbolic link before the `..` after it, for the gateway and the command line alike', async () => {
    const root = realpathSync(tempDir('data-dir-path'));
    mkdirSync(join(root, 'volumes', 'disk'), { recursive: true });
    symlinkSync(join(root, 'volumes', 'disk'), join(root, 'link'));
    // The kernel takes this to root/volumes/gateway; read as text it would be root/gateway.
    const dataDir = `${root}/link/../gateway`;
    const env = gatewayEnv('data-dir-path', { DATA_DIR: dataDir, LOG_LEVEL: 'info' });
    const gateway = await spawnGateway(env);
    try {
      expect((await post(gateway.url, [{ ship_id: 'path', cargo_id: 'c', value: 1 }])).status).toBe(200);
      expect(await waitForCount(`SELECT count() FROM "${env.QUESTDB_TABLE}"`, 1)).toBe(1);
    } finally {
      gateway.child.kill('SIGTERM');
      expect((await gateway.exited).code).toBe(0);
    }
    const real = join(root, 'volumes', 'gateway');
    expect(existsSync(join(real, 'queue.db'))).toBe(true);
    expect(existsSync(join(root, 'gateway'))).toBe(false);
    // The command line reads the same queue and writes the key file the gateway reads.
    const cli = (args: string[]) =>
      run(process.execPath, [inject('bundlePath'), ...args], { env: { DATA_DIR: dataDir, PATH: process.env['PATH'] ?? '' } });
    expect((await cli(['dead-letters', 'list'])).stdout).toMatch(/^0 dead letter\(s\)/);
    await cli(['keys', 'add', 'sensor-1']);
    expect(existsSync(join(real, 'api-keys'))).toBe(true);
    expect(existsSync(join(root, 'gateway'))).toBe(false);
  });
});

describe('one owner per data directory', () => {
  it('refuses a second gateway (exit 75, naming the owner), by any path, and lets a restart in at once after kill -9', async () => {
    const env = gatewayEnv('owner');
    const [dataDir, table] = [env.DATA_DIR, env.QUESTDB_TABLE];
    const first = await spawnGateway(env);
    const link = join(tempDir('owner-link'), 'data');
    symlinkSync(dataDir, link);
    try {
      for (const path of [dataDir, link]) {
        const second = await serveUntilExit({ ...offlineEnv(path), QUESTDB_TABLE: table });
        expect(second.code).toBe(75);
        // Named as the file system resolves it, whichever path led there.
        expect(second.stderr).toContain(`DATA_DIR ${realpathSync(dataDir)} is in use by \`serve\`, pid ${first.pid}, since`);
        expect(second.stderr).toContain('Only one gateway may own a data directory');
      }
      const readings = (from: number) => Array.from({ length: 50 }, (_, i) => ({ ship_id: 'owner', cargo_id: `c${from + i}`, value: i }));
      expect((await post(first.url, readings(0))).status).toBe(200);

      first.child.kill('SIGKILL');
      await first.exited;
      // The kernel let go of the dead owner's lock: no stale lock, no waiting.
      const startedAt = Date.now();
      const next = await spawnGateway(env);
      expect(Date.now() - startedAt).toBeLessThan(10_000);
      try {
        expect((await post(next.url, readings(50))).status).toBe(200);
        // Its delivery thread, on its own connections to the queue, delivers both runs' readings.
        expect(await waitForCount(`SELECT count() FROM "${table}"`, 100)).toBe(100);
      } finally {
        next.child.kill('SIGTERM');
        expect((await next.exited).code).toBe(0);
      }
      expect(existsSync(join(dataDir, 'owner.json'))).toBe(false);
    } finally {
      if (first.child.exitCode === null && first.child.signalCode === null) first.child.kill('SIGKILL');
    }
  });

  /**
   * The file systems a data directory lives on besides the appliance's ext4 (the temporary
   * directory above): tmpfs, overlayfs (a container's own layer), a bind mount (a container's
   * volume, reached by another path), each made in a private mount namespace. A holder, a second
   * gateway, kill -9 of the holder, a third gateway through the other path.
   */
  const layouts: Record<string, string> = {
    tmpfs: 'mount -t tmpfs -o size=64m tmpfs "$ROOT/a"; HOLDER="$ROOT/a"; OTHER="$ROOT/a"',
    overlayfs:
      'mkdir -p "$ROOT/lower" "$ROOT/upper" "$ROOT/work"; mount -t overlay overlay -o lowerdir="$ROOT/lower",upperdir="$ROOT/upper",workdir="$ROOT/work" "$ROOT/a"; HOLDER="$ROOT/a/data"; OTHER="$ROOT/a/data"',
    'bind mount': 'mkdir -p "$ROOT/b"; mount --bind "$ROOT/a" "$ROOT/b"; HOLDER="$ROOT/a"; OTHER="$ROOT/b"',
  };
  const script = (layout: string) => `
set -e
${layout}
DATA_DIR="$HOLDER" "$NODE" "$BUNDLE" serve >"$ROOT/holder.log" 2>&1 &
HOLDER_PID=$!
for i in $(seq 1 400); do grep -qs "\\"pid\\":$HOLDER_PID," "$HOLDER/owner.json" && break; sleep 0.05; done
set +e
DATA_DIR="$OTHER" "$NODE" "$BUNDLE" serve >/dev/null 2>"$ROOT/second.err"
echo "second $?"
set -e
cat "$ROOT/second.err"
kill -9 $HOLDER_PID
wait $HOLDER_PID || true
DATA_DIR="$OTHER" "$NODE" "$BUNDLE" serve >"$ROOT/third.log" 2>&1 &
THIRD_PID=$!
for i in $(seq 1 400); do grep -qs '"event":"started"' "$ROOT/third.log" && break; sleep 0.05; done
grep -qs "\\"pid\\":$THIRD_PID," "$OTHER/owner.json" && echo "third owns it"
kill -TERM $THIRD_PID
set +e
wait $THIRD_PID
echo "third $?"
`;

  for (const [name, layout] of Object.entries(layouts)) {
    it(`holds on ${name}`, async () => {
      const root = tempDir('owner-fs');
      mkdirSync(join(root, 'a'));
      const { stdout } = await run('unshare', ['--map-root-user', '--mount', 'sh', '-c', script(layout)], {
        env: { ...offlineEnv(''), ROOT: root, NODE: process.execPath, BUNDLE: inject('bundlePath'), DATA_DIR: '' },
        timeout: 60_000,
      }).catch((error: { stdout: string; stderr: string }) => {
        throw new Error(`${name}: ${error.stderr}\n${error.stdout}`);
      });
      expect(stdout).toMatch(/^second 75$/m);
      expect(stdout).toMatch(/is in use by `serve`, pid \d+, since/);
      expect(stdout).toMatch(/^third owns it$/m);
      expect(stdout).toMatch(/^third 0$/m);
    }, 90_000);
  }

  it('holds on powercut-fs (FUSE), and after a cut the next gateway starts', async () => {
    const disk = await createPowercutDisk();
    try {
      const fs = await disk.mount();
      const dataDir = join(fs.mountPoint, 'data');
      const holder = await spawnGateway(offlineEnv(dataDir));
      const second = await serveUntilExit(offlineEnv(dataDir));
      expect(second.code).toBe(75);
      expect(second.stderr).toContain(`pid ${holder.pid}`);
      holder.child.kill('SIGKILL');
      await holder.exited;
      await fs.cut();
      await fs.unmount();
      const again = await disk.mount();
      const third = await spawnGateway(offlineEnv(join(again.mountPoint, 'data')));
      await waitUntil('the third gateway answers', async () => (await fetch(`${third.url}/readyz`)).status === 200);
      third.child.kill('SIGTERM');
      expect((await third.exited).code).toBe(0);
    } finally {
      await disk.remove();
    }
  }, 90_000);
});
