// npm run appliance:update-test -- [--old DIR] [--new DIR]: updates over the air on an emulated
// board (lib/vm.mjs), from an earlier release's image to this tree's bundle, with every way it can
// go wrong that a site will meet. One card, one chain of boots:
//   1. the old release's card boots with QuestDB kept from starting in its slot (unreachable for the
//      gateway): readings are queued; the central tier's address offers a bundle signed with a key
//      the board does not trust: refused, slot B and the boot state untouched; power is cut while
//      readings are being sent;
//   2. the new bundle on the boot partition: power is cut 3 s into the installation, then 20 s into
//      the next attempt: each time the old slot boots with every answered reading queued, and the
//      installation starts again; the third attempt completes;
//   3. power is cut during the trial boot of the new slot: the board comes back on the old slot by
//      itself and says the trial was never confirmed;
//   4. the bundle again: the new slot boots on trial, its QuestDB starts, the gateway delivers, the
//      trial is confirmed; QuestDB holds every answered reading exactly once;
//   5. the central tier offers the old release: refused as a downgrade, nothing written;
//   6. a bundle whose gateway cannot start: installed, tried, marked bad, and the board is back on
//      the committed slot by itself, saying why, with its queue whole.
// Builds what it needs when missing: the previous release's image (--release, the newest release
// CHANGELOG.md records) and this tree's, both without Grafana and with the test signing keys.
// Runs as root, in a network namespace of its own.
import { createServer } from 'node:http';
import { createReadStream, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BOOT_BUNDLE, RESULT_FILE, compareVersions } from './board/update.mjs';
import { applianceCache, ensureHostPackages, requireRoot, run, stopwatch } from './lib/host.mjs';
import { rebundle, releaseFolder, untrustedSmallBundle } from './lib/test-bundles.mjs';
import {
  HOST_FROM_GUEST,
  VM_HOST_PACKAGES,
  bootFiles,
  bootMachine,
  editPartition,
  inNetworkNamespace,
  instrumentSlot,
  partitionDigest,
  partitions,
  readBootFile,
  waitForHttp,
  writeBootFile,
} from './lib/vm.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { previousRelease } from '../scripts/lib/releases.mjs';
import { postReadings, questdbCount, gatewayStatus } from './lib/vm-checks.mjs';

const elapsed = stopwatch();
const say = (/** @type {string} */ message) => process.stdout.write(`[appliance:update-test ${elapsed().toFixed(0)} s] ${message}\n`);
const expect = (/** @type {boolean} */ condition, /** @type {string} */ message) => {
  if (!condition) throw new Error(message);
};
const args = process.argv.slice(2);
const option = (/** @type {string} */ name) => {
  const index = args.indexOf(name);
  return index >= 0 ? resolve(String(args[index + 1])) : undefined;
};

requireRoot('run the emulated board');
// The previous release: the newest CHANGELOG.md records with its commit (tags do not travel).
const OLD_RELEASE = previousRelease().version;
if (process.env['HARBOR_VM_NETNS'] !== '1') {
  ensureHostPackages({ ...VM_HOST_PACKAGES, rauc: 'rauc', mksquashfs: 'squashfs-tools', openssl: 'openssl' });
  // Built outside the namespace: the builds fetch packages.
  releaseFolder({ version: OLD_RELEASE, dir: option('--old') });
  releaseFolder({ dir: option('--new') });
}
inNetworkNamespace();

const oldRelease = releaseFolder({ version: OLD_RELEASE, dir: option('--old'), build: false });
const newRelease = releaseFolder({ dir: option('--new'), build: false });
expect(compareVersions(newRelease.version, oldRelease.version) > 0, `${newRelease.version} is not newer than ${oldRelease.version}`);
mkdirSync(applianceCache(), { recursive: true });
const work = mkdtempSync(join(applianceCache(), 'update-test-'));
/** @type {string[]} */
const timings = [];
let failed = true;
try {
  // The bundles the board is offered besides the good one, made from it.
  const untrusted = untrustedSmallBundle({ to: join(work, 'untrusted.raucb'), work, version: `${newRelease.version}.2` });
  // The release's bundle with the emulated board's drop-ins on its slot (lib/vm.mjs).
  const update = rebundle({ from: newRelease.bundle, to: join(work, 'update.raucb'), work, emulated: true });
  const broken = rebundle({
    from: newRelease.bundle,
    to: join(work, 'broken.raucb'),
    work,
    version: `${newRelease.version}.1`,
    description: 'a gateway that cannot start',
    // The gateway's bundle replaced by one that fails as a bad release would, at start.
    breakGateway: true,
    emulated: true,
  });
  say(`bundles: ${newRelease.version} (${mib(newRelease.bundle)} MiB), one signed by an untrusted key, one whose gateway cannot start`);

  const disk = join(work, 'disk.img');
  run('cp', ['--sparse=always', oldRelease.image, disk]);
  run('truncate', ['-s', '+4G', disk]);
  const parts = partitions(disk);
  instrumentSlot(disk, parts.rootA, work);
  // QuestDB cannot start in the old slot: the gateway finds it unreachable and queues.
  editPartition(disk, parts.rootA, [
    'rm /etc/systemd/system/multi-user.target.wants/harbor-questdb.service',
    'rm /etc/systemd/system/harbor-questdb.service',
    'symlink /etc/systemd/system/harbor-questdb.service /dev/null',
  ]);
  // The test reads QuestDB from outside the board: its HTTP port on every address (data partition).
  writeFileSync(join(work, 'questdb.env'), 'QDB_HTTP_BIND_TO=0.0.0.0:9000\n');
  editPartition(disk, parts.data, [`write ${join(work, 'questdb.env')} /lib/harbor-appliance/etc/harbor-gateway/questdb.env`]);

  const bundlePort = await freePort();
  const offer = bundleServer(bundlePort);
  const apiKey = `update-test-${Date.now().toString(16)}-key`;
  const questdbPassword = `update-test-questdb-${Date.now().toString(16)}`;
  writeFileSync(
    join(work, 'harbor.conf'),
    [
      'SITE_NAME=Update test',
      'HOSTNAME=gw-update-test',
      `API_KEY=${apiKey}`,
      `QUESTDB_PASSWORD=${questdbPassword}`,
      // Nothing answers there: the board never looks beyond the test's namespace.
      `NTP_SERVERS=${HOST_FROM_GUEST}`,
      `UPDATE_URL=http://${HOST_FROM_GUEST}:${bundlePort}/site.raucb`,
      // QuestDB's first start under full emulation takes minutes.
      'UPDATE_TRIAL_SECONDS=2400',
      '',
    ].join('\r\n'),
  );
  writeBootFile(disk, parts.boot, join(work, 'harbor.conf'), 'harbor.conf');
  const slotB = () => partitionDigest(disk, parts.rootB);
  const bootState = () => `${readBootFile(disk, parts.boot, 'harbor-slot.env')}|${readBootFile(disk, parts.boot, 'harbor-try.env')}`;
  const emptySlotB = slotB();
  say(`card prepared from ${oldRelease.name}`);

  const port = await freePort();
  const questdbPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  /** @type {Set<number>} values of every reading the gateway answered 200 */
  const answered = new Set();
  let next = 0;
  let boot = 0;
  const start = () => {
    boot += 1;
    return bootMachine({ disk, serial: join(work, `serial-${boot}.log`), forwards: { [port]: 8000, [questdbPort]: 9000 }, work });
  };
  /** Boots, checks the slot U-Boot chose, waits for the gateway; the seconds from U-Boot to ready. */
  const bootInto = async (/** @type {'A' | 'B'} */ slot, /** @type {string} */ why) => {
    const machine = start();
    const chosen = await machine.waitFor(/booting slot ([AB]) \(partition \d, trial (\d)\)/, 300_000, 'the boot script choosing a slot');
    const started = Date.now();
    expect(chosen[1] === slot, `boot ${boot} (${why}): U-Boot chose slot ${chosen[1]}, expected ${slot}; console: ${machine.serial}`);
    await waitForHttp(`${url}/readyz`, 20 * 60_000, machine);
    const seconds = Math.round((Date.now() - started) / 1000);
    say(`boot ${boot}: slot ${slot}${chosen[2] === '1' ? ' on trial' : ''} (${why}), gateway ready ${seconds} s after U-Boot`);
    return { machine, seconds, trial: chosen[2] === '1' };
  };
  const cutAndWait = async (/** @type {import('./lib/vm.mjs').Machine} */ machine) => {
    machine.cut();
    await machine.exited;
  };
  /** Every answered reading is queued: the power cuts lost none. */
  const expectQueueWhole = async (/** @type {string} */ when) => {
    const status = await gatewayStatus(url, apiKey);
    expect(
      status.queue.readings >= answered.size,
      `${when}: the queue holds ${status.queue.readings} readings, ${answered.size} were answered`,
    );
    return status.queue.readings;
  };

  // 1. The old release, QuestDB unreachable; an untrusted bundle from the central tier; a cut under load.
  const first = await bootInto('A', 'first boot of the old release');
  offer.serve(untrusted);
  next = await postReadings({ url, apiKey, from: next, count: 500, answered });
  await first.machine.waitFor(
    /refused http:\/\/\S+: the bundle's signature or format was refused/,
    10 * 60_000,
    'the untrusted bundle refused',
  );
  offer.serve(undefined);
  expect(slotB() === emptySlotB, 'slot B changed after the untrusted bundle');
  say(`untrusted bundle refused; ${answered.size} readings queued while QuestDB is unreachable`);
  const load = postReadings({ url, apiKey, from: next, count: 100_000, answered, stopOnError: true });
  await new Promise((r) => setTimeout(r, 5000));
  await cutAndWait(first.machine);
  next = await load;
  expect(slotB() === emptySlotB && bootState().includes('HARBOR_SLOT=A'), 'the untrusted bundle wrote to slot B or the boot state');
  say(`power cut under load: ${answered.size} readings answered in all`);

  // 2. The new bundle on the boot partition; power cuts 3 s and 60 s into the installation.
  writeBootFile(disk, parts.boot, update, BOOT_BUNDLE);
  for (const [attempt, delay] of /** @type {const} */ ([
    [1, 3],
    [2, 20],
  ])) {
    const { machine } = await bootInto('A', attempt === 1 ? 'the bundle on the boot partition' : 'after a cut during installation');
    const queued = await expectQueueWhole(`boot ${boot}`);
    await machine.waitFor(/installing \S+ into slot B/, 15 * 60_000, 'the installation starting');
    await new Promise((r) => setTimeout(r, delay * 1000));
    await cutAndWait(machine);
    say(`power cut ${delay} s into installation attempt ${attempt} (queue held ${queued} readings)`);
  }
  const third = await bootInto('A', 'after the second cut during installation');
  await expectQueueWhole(`boot ${boot}`);
  const installStarted = Date.now();
  await third.machine.waitFor(/installed \S+ into slot B/, 60 * 60_000, 'the installation completing');
  const installSeconds = Math.round((Date.now() - installStarted) / 1000);
  say(`installation completed in ${installSeconds} s (third attempt)`);

  // 3. A cut during the trial boot: back on the old slot by itself.
  const trialBoot = await third.machine.waitFor(
    /booting slot ([AB]) \(partition \d, trial (\d)\)/,
    10 * 60_000,
    'the reboot into the trial',
  );
  expect(trialBoot[1] === 'B' && trialBoot[2] === '1', `after the installation U-Boot chose slot ${trialBoot[1]} trial ${trialBoot[2]}`);
  await new Promise((r) => setTimeout(r, 20_000));
  await cutAndWait(third.machine);
  const back = await bootInto('A', 'after a cut during the trial boot');
  await back.machine.waitFor(/failed and was rolled back.*never confirmed/, 5 * 60_000, 'the report of the unconfirmed trial');
  await expectQueueWhole(`boot ${boot}`);
  expect(/never confirmed/.test(readBootFileNow(back.machine) ?? ''), 'no report');
  await cutAndWait(back.machine);
  expect(
    /never confirmed/.test(readBootFile(disk, parts.boot, RESULT_FILE) ?? ''),
    `${RESULT_FILE} does not say the trial was never confirmed`,
  );
  say('power cut during the trial boot: the old slot came back by itself and says the trial was never confirmed');

  // 4. The bundle again: installed, tried, confirmed; every reading delivered once.
  writeBootFile(disk, parts.boot, update, BOOT_BUNDLE);
  const fourth = await bootInto('A', 'the bundle again');
  const updateStarted = Date.now();
  await fourth.machine.waitFor(/installed \S+ into slot B/, 60 * 60_000, 'the installation completing');
  const trial = await bootInto('B', 'trial of the new release');
  expect(trial.trial, 'the new slot did not boot on trial');
  await trial.machine.waitFor(/is ready and confirmed/, 45 * 60_000, 'the trial confirmed');
  const updateSeconds = Math.round((Date.now() - updateStarted) / 1000);
  const delivered = await waitForDelivery({ url, apiKey, questdbPort, questdbPassword, answered });
  say(
    `the new release confirmed ${updateSeconds} s after the installation began; QuestDB holds ${delivered.rows} rows, ${delivered.distinct} distinct, of ${answered.size} answered readings`,
  );
  timings.push(`update (install start to confirmed): ${updateSeconds} s; reboot to ready on trial: ${trial.seconds} s`);

  // 5. The old release offered by the central tier: a downgrade, refused.
  const digestA = partitionDigest(disk, parts.rootA);
  const stateBefore = bootState();
  offer.serve(oldRelease.bundle);
  await trial.machine.waitFor(/refused http:\/\/\S+: \S+ is older than \S+ \(a downgrade\)/, 15 * 60_000, 'the downgrade refused');
  offer.serve(undefined);
  await cutAndWait(trial.machine);
  expect(
    partitionDigest(disk, parts.rootA) === digestA && bootState() === stateBefore,
    'the refused downgrade wrote to a slot or the boot state',
  );
  say('downgrade to the old release refused; nothing written');

  // 6. A bundle whose gateway cannot start: tried, marked bad, back on slot B.
  writeBootFile(disk, parts.boot, broken, BOOT_BUNDLE);
  const sixth = await bootInto('B', 'a bundle whose gateway cannot start');
  await sixth.machine.waitFor(/installed \S+ into slot A/, 60 * 60_000, 'the broken bundle installed');
  const failedTrial = await sixth.machine.waitFor(/the trial of \S+ failed: ([^\n]+)/, 60 * 60_000, 'the trial failing');
  const home = await bootInto('B', 'back from the failed trial');
  await home.machine.waitFor(/failed and was rolled back/, 5 * 60_000, 'the rollback report');
  const finalStatus = await gatewayStatus(url, apiKey);
  const after = await questdbCount({ port: questdbPort, password: questdbPassword, values: answered });
  await cutAndWait(home.machine);
  const result = readBootFile(disk, parts.boot, RESULT_FILE) ?? '';
  expect(/failed and was rolled back.*harbor-gateway\.service/.test(result), `${RESULT_FILE} says: ${result}`);
  expect(
    finalStatus.queue.readings === 0 && after.missing.length === 0 && after.rows === answered.size,
    `after the rollback: ${finalStatus.queue.readings} queued, ${after.rows} rows in QuestDB for ${answered.size} answered readings`,
  );
  say(`the broken release was rolled back by the board itself: ${String(failedTrial[1]).slice(0, 200)}`);
  say(`${RESULT_FILE}: ${result.trim().slice(0, 300)}`);
  const left = bootFiles(disk, parts.boot).filter((name) => name.startsWith('harbor-update.raucb'));
  expect(left.length === 0, `the boot partition still holds ${left.join(', ')}`);

  timings.push(`bundle: ${mib(newRelease.bundle)} MiB; third installation attempt: ${installSeconds} s`);
  failed = false;
} catch (error) {
  // process.exit below would otherwise drop the reason.
  process.stdout.write(`${/** @type {Error} */ (error).stack ?? error}\n`);
} finally {
  process.stdout.write(`appliance:update-test ${failed ? 'FAILED' : 'passed'} in ${elapsed().toFixed(0)} s\n${timings.join('\n')}\n`);
  if (failed) process.stdout.write(`consoles kept in ${work}\n`);
  else rmSync(work, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}

function mib(/** @type {string} */ file) {
  return (statSync(file).size / 2 ** 20).toFixed(0);
}

/** The console's last update line, for the message of a failed check. */
function readBootFileNow(/** @type {import('./lib/vm.mjs').Machine} */ machine) {
  return machine
    .console()
    .split('\n')
    .filter((line) => line.includes('harbor-update'))
    .at(-1);
}

/**
 * An HTTP server for the central tier's bundle address: 404 until a bundle is offered, then the
 * bundle with an ETag of its name and size.
 * @param {number} port
 */
function bundleServer(port) {
  /** @type {string | undefined} */
  let offered;
  const server = createServer((request, response) => {
    if (offered === undefined) {
      response.writeHead(404).end();
      return;
    }
    const etag = `"${offered.split('/').at(-1)}-${statSync(offered).size}"`;
    if (request.headers['if-none-match'] === etag) {
      response.writeHead(304).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': statSync(offered).size, etag });
    createReadStream(offered).pipe(response);
  });
  server.listen(port, '127.0.0.1');
  server.unref();
  return { serve: (/** @type {string | undefined} */ file) => (offered = file) };
}

/**
 * Waits until the queue is empty, then counts the readings in the board's QuestDB.
 * @param {{ url: string, apiKey: string, questdbPort: number, questdbPassword: string, answered: Set<number> }} options
 */
async function waitForDelivery({ url, apiKey, questdbPort, questdbPassword, answered }) {
  const deadline = Date.now() + 30 * 60_000;
  for (;;) {
    const status = await gatewayStatus(url, apiKey);
    if (status.queue.readings === 0) break;
    if (Date.now() > deadline) throw new Error(`the queue still holds ${status.queue.readings} readings after 30 minutes`);
    await new Promise((r) => setTimeout(r, 5000));
  }
  const counts = await questdbCount({ port: questdbPort, password: questdbPassword, values: answered });
  expect(
    counts.missing.length === 0,
    `${counts.missing.length} answered readings are not in QuestDB, e.g. ${counts.missing.slice(0, 5).join(', ')}`,
  );
  expect(counts.rows === counts.distinct, `QuestDB holds ${counts.rows} rows for ${counts.distinct} readings: some twice`);
  return counts;
}
