// npm run appliance:boot-test -- [IMAGE]: boots a card image built with --kernel debian in an
// emulated arm64 machine (qemu-system-aarch64 "virt", the image's own kernel and initramfs; a
// Raspberry Pi is not emulated) on a copy of the image 4 GiB larger than built, as a bigger card:
//   boot 1: first boot applies a harbor.conf (READ_ONLY_ROOT=yes, passwords left to generate), grows
//           /var, shows the generated secrets on the console and in harbor-credentials.txt; the
//           gateway, started by systemd from harbor-gateway.service, answers on the forwarded port
//           8000 with the configured key and queues a batch;
//   power cut (SIGKILL of the machine); the card holds the API key and gateway.env where the units
//           read them;
//   boot 2: the one-time credentials file is gone, the root is read-only in fstab, and the batch is
//           still queued: with the root read-only since first boot, the gateway's state directory
//           (/var/lib/private/harbor-gateway) can only be on the /var partition.
// harbor-questdb.service and harbor-grafana.service are masked in the copy, so the readings must
// wait in the queue and the boots stay within minutes under emulation.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { freePort } from '../scripts/lib/ports.mjs';
import { GATEWAY_ENV, credentialFile } from './firstboot/firstboot.mjs';
import { parseEnvText } from './firstboot/settings.mjs';
import { applianceCache, ensureHostPackages, output, repoRoot, run, stopwatch } from './lib/host.mjs';
import { UNIT_DIR } from './lib/layout.mjs';

const elapsed = stopwatch();
const say = (/** @type {string} */ message) => process.stdout.write(`[appliance:boot-test ${elapsed().toFixed(0)} s] ${message}\n`);
const expect = (/** @type {boolean} */ condition, /** @type {string} */ message) => {
  if (!condition) throw new Error(message);
};

ensureHostPackages({ 'qemu-system-aarch64': 'qemu-system-arm', mcopy: 'mtools', sfdisk: 'fdisk', debugfs: 'e2fsprogs' });
const image = process.argv[2] ? resolve(process.argv[2]) : newestImage();
mkdirSync(applianceCache(), { recursive: true });
const work = mkdtempSync(join(applianceCache(), 'boot-test-'));
let failed = true;
try {
  const disk = join(work, 'disk.img');
  run('cp', ['--sparse=always', image, disk]);
  run('truncate', ['-s', `+4G`, disk]);
  /** @type {{ partitiontable: { partitions: { start: number, size: number }[] } }} */
  const table = JSON.parse(output('sfdisk', ['--json', disk]));
  const [boot, root, variable] = table.partitiontable.partitions;
  if (!boot || !root || !variable) throw new Error(`${image} does not have the appliance's three partitions`);
  const fat = `${disk}@@${boot.start * 512}`;

  const names = output('mdir', ['-b', '-i', fat, '::/'])
    .split('\n')
    .map((line) => line.replace('::/', ''));
  const kernel = names.find((name) => name.startsWith('vmlinuz-'));
  const initrd = names.find((name) => name.startsWith('initrd.img-'));
  if (!kernel || !initrd) throw new Error('no Debian kernel on the boot partition: boot-test needs an image built with --kernel debian');
  run('mcopy', ['-i', fat, `::/${kernel}`, join(work, 'vmlinuz')]);
  run('mcopy', ['-i', fat, `::/${initrd}`, join(work, 'initrd')]);

  // Masked, not just left out of multi-user.target: harbor-gateway.service wants harbor-questdb.service.
  editRoot(
    disk,
    root,
    ['harbor-questdb.service', 'harbor-grafana.service'].flatMap((unit) => [
      `rm /${UNIT_DIR}/multi-user.target.wants/${unit}`,
      `rm /${UNIT_DIR}/${unit}`,
      `symlink /${UNIT_DIR}/${unit} /dev/null`,
    ]),
  );
  const apiKey = `boot-test-${randomBytes(12).toString('hex')}`;
  writeFileSync(join(work, 'harbor.conf'), `SITE_NAME=Boot test\r\nHOSTNAME=gw-boot-test\r\nAPI_KEY=${apiKey}\r\nREAD_ONLY_ROOT=yes\r\n`);
  run('mcopy', ['-o', '-i', fat, join(work, 'harbor.conf'), '::/harbor.conf']);
  say(`image copy prepared: ${image}`);

  const headers = { 'X-API-Key': apiKey };
  const first = await bootMachine(disk, join(work, 'serial-1.log'));
  try {
    const batch = await fetch(`${first.url}/api/v2/ingest/batch`, {
      method: 'POST',
      headers,
      body: JSON.stringify([
        { time: '2026-11-21T10:00:00.000Z', ship_id: 'boot-test', cargo_id: 'latitude', value: 53.5461 },
        { time: '2026-11-21T10:00:00.000Z', ship_id: 'boot-test', cargo_id: 'longitude', value: 9.9661 },
      ]),
    });
    expect(batch.status === 200, `batch answered ${batch.status}`);
    const status = await getStatus(first.url, headers);
    expect(status.queue.readings === 2, `queue holds ${status.queue.readings} readings, expected 2`);
    expect(status.queue.maxBytes > 512 * 1024 * 1024, `queue bound ${status.queue.maxBytes} does not reflect the grown /var`);
    const serial = readFileSync(first.serial, 'utf8');
    expect(serial.includes('Harbor Gateway "Boot test" on gw-boot-test'), 'the console does not show the site and hostname');
    expect(
      serial.includes('GRAFANA_ADMIN_PASSWORD=') && !serial.includes(apiKey),
      'the console must show the generated secrets and only those',
    );
    // systemd marks unit names with colour codes on the console, and stops writing status there
    // once the login prompt has it: "Started" may never show when the gateway is ready after the
    // prompt, so the answers above stand for it and the console shows who started it.
    expect(
      /Starting harbor-gateway\.service/.test(stripVTControlCharacters(serial)),
      'the console does not show systemd starting harbor-gateway.service',
    );
    say(
      `boot 1: first boot applied, gateway up after ${first.seconds} s, 2 readings queued, queue bound ${(status.queue.maxBytes / 2 ** 20).toFixed(0)} MiB`,
    );
  } finally {
    first.cut();
  }
  await first.exited;
  const bootFiles = output('mdir', ['-b', '-i', fat, '::/']);
  expect(!bootFiles.includes('harbor.conf'), 'harbor.conf is still on the boot partition');
  expect(bootFiles.includes('harbor-credentials.txt') && bootFiles.includes('harbor-applied.txt'), 'credentials or applied file missing');
  const grown = /** @type {{ partitiontable: { partitions: { start: number, size: number }[] } }} */ (
    JSON.parse(output('sfdisk', ['--json', disk]))
  );
  const varAfter = grown.partitiontable.partitions[2];
  expect(
    varAfter !== undefined && (varAfter.start + varAfter.size) * 512 > statSync(disk).size - 2 ** 20,
    '/var was not grown to the end of the card',
  );
  say('power cut; /var fills the card, harbor.conf replaced by harbor-applied.txt and harbor-credentials.txt');
  expect(readPartitionFile(disk, root, `/${credentialFile('api_key')}`) === apiKey, `the API key is not in /${credentialFile('api_key')}`);
  const gatewayEnv = parseEnvText(readPartitionFile(disk, root, `/${GATEWAY_ENV}`));
  expect(
    gatewayEnv['GATEWAY_NAME'] === 'Boot test' && Number(gatewayEnv['QUEUE_MAX_BYTES']) > 512 * 2 ** 20,
    `/${GATEWAY_ENV} holds ${JSON.stringify(gatewayEnv)}`,
  );
  say(`the card holds the API key in /${credentialFile('api_key')} and gateway.env from harbor.conf`);

  const second = await bootMachine(disk, join(work, 'serial-2.log'));
  try {
    const status = await getStatus(second.url, headers);
    expect(status.queue.readings === 2, `after the power cut the queue holds ${status.queue.readings} readings, expected 2`);
    say(`boot 2: gateway up after ${second.seconds} s, the 2 readings survived the power cut`);
  } finally {
    second.cut();
  }
  await second.exited;
  expect(!output('mdir', ['-b', '-i', fat, '::/']).includes('harbor-credentials.txt'), 'harbor-credentials.txt survived the second boot');
  const fstab = readPartitionFile(disk, root, '/etc/fstab');
  expect(/^LABEL=harbor-root\s+\/\s+ext4\s+ro,/m.test(fstab), 'the root is not read-only in fstab');
  say('the one-time credentials file is gone; fstab mounts the root read-only');
  failed = false;
} finally {
  process.stdout.write(`appliance:boot-test ${failed ? 'FAILED' : 'passed'} in ${elapsed().toFixed(0)} s\n`);
  if (failed) process.stdout.write(`serial logs kept in ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
}

function newestImage() {
  const dir = join(repoRoot, 'dist/appliance');
  const images = existsSync(dir)
    ? readdirSync(dir)
        .filter((name) => /-debian-arm64.*\.img$/.test(name))
        .map((name) => join(dir, name))
    : [];
  images.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (images[0] === undefined)
    throw new Error('no dist/appliance/*-debian-arm64*.img: run npm run appliance:build -- --kernel debian --no-compress first');
  return images[0];
}

/** Runs debugfs requests on the root partition of the disk image (copied out and back). */
function editRoot(/** @type {string} */ disk, /** @type {{ start: number, size: number }} */ part, /** @type {string[]} */ requests) {
  const file = join(work, 'root.ext4');
  run('dd', [`if=${disk}`, `of=${file}`, 'bs=512', `skip=${part.start}`, `count=${part.size}`, 'conv=sparse', 'status=none']);
  for (const request of requests) spawnSync('debugfs', ['-w', '-R', request, file], { stdio: 'ignore' });
  run('dd', [`if=${file}`, `of=${disk}`, 'bs=512', `seek=${part.start}`, 'conv=notrunc,sparse', 'status=none']);
  rmSync(file);
}

/** A file of an ext4 partition of the disk image, read in place (debugfs's offset= option). */
function readPartitionFile(/** @type {string} */ disk, /** @type {{ start: number }} */ part, /** @type {string} */ path) {
  return spawnSync('debugfs', ['-R', `cat ${path}`, `${disk}?offset=${part.start * 512}`], { encoding: 'utf8' }).stdout;
}

/**
 * @param {string} url
 * @param {Record<string, string>} headers
 * @returns {Promise<{ queue: { readings: number, maxBytes: number } }>}
 */
async function getStatus(url, headers) {
  const response = await fetch(`${url}/status`, { headers });
  expect(response.status === 200, `/status answered ${response.status}`);
  return /** @type {Promise<{ queue: { readings: number, maxBytes: number } }>} */ (response.json());
}

/** Boots the disk in qemu with port 8000 forwarded to a free loopback port; resolves once /readyz answers. */
async function bootMachine(/** @type {string} */ disk, /** @type {string} */ serial) {
  const port = await freePort();
  const log = openSync(join(work, 'qemu.log'), 'a');
  const machine = spawn(
    'qemu-system-aarch64',
    [
      '-M',
      'virt',
      '-cpu',
      'cortex-a72',
      '-smp',
      '2',
      '-m',
      '2048',
      '-nographic',
      '-monitor',
      'none',
      '-kernel',
      join(work, 'vmlinuz'),
      '-initrd',
      join(work, 'initrd'),
      '-append',
      'root=LABEL=harbor-root rw console=ttyAMA0 net.ifnames=0 fsck.repair=yes rootwait',
      '-drive',
      `file=${disk},format=raw,if=none,id=disk`,
      '-device',
      'virtio-blk-device,drive=disk',
      '-netdev',
      `user,id=net,hostfwd=tcp:127.0.0.1:${port}-:8000`,
      '-device',
      'virtio-net-device,netdev=net',
      '-serial',
      `file:${serial}`,
    ],
    { stdio: ['ignore', log, log] },
  );
  closeSync(log);
  const exited = new Promise((resolveExit) => machine.once('exit', resolveExit));
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    if (machine.exitCode !== null || machine.signalCode !== null)
      throw new Error(`qemu exited: ${readFileSync(join(work, 'qemu.log'), 'utf8').slice(-2000)}`);
    try {
      if ((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(5000) })).ok) break;
    } catch {
      // still booting
    }
    if (Date.now() - started > 15 * 60_000) {
      machine.kill('SIGKILL');
      throw new Error(`the gateway did not answer within 15 minutes; serial log: ${serial}`);
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
  return { url, serial, exited, seconds: Math.round((Date.now() - started) / 1000), cut: () => machine.kill('SIGKILL') };
}
