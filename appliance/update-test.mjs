// npm run appliance:update-test -- [--proofs LIST] [--old DIR] [--new DIR]: updates over the air on
// an emulated board (lib/vm.mjs), from an earlier release's image to this tree's bundle, with every
// way it can go wrong that a site will meet. One card, one chain of boots; --proofs picks some of
// them (comma-separated; all by default), and the chain then runs only what those need:
//   signature     the old release's card boots with QuestDB kept from starting in its slot
//                 (unreachable for the gateway) while readings queue; the central tier's address
//                 offers a bundle signed with a key the board does not trust: refused, slot B and
//                 the boot state untouched. (Every chain starts on that card, with readings queued
//                 and power cut while they are being sent.)
//   install-cuts  the new bundle on the boot partition: power is cut 3 s into the installation,
//                 then 20 s into the next attempt: each time the old slot boots with every answered
//                 reading queued, and the installation starts again; the third attempt completes;
//   trial-cut     power is cut during the trial boot of the new slot: the board comes back on the
//                 old slot by itself and says the trial was never confirmed; the bundle is then
//                 installed again;
//   update        the new slot boots on trial, its QuestDB starts, the gateway delivers, the trial
//                 is confirmed; QuestDB holds every answered reading exactly once (the base of the
//                 two below, which run on the updated board);
//   downgrade     at the next boot of the updated board (the address is not checked on a trial
//                 boot) the central tier offers the old release: refused as a downgrade, nothing written;
//   broken        a bundle whose gateway cannot start: installed, tried, marked bad, and the board
//                 is back on the committed slot by itself, saying why, with its queue whole (from
//                 the updated board when the chain updates; chosen alone, from the old release).
// Builds what it needs when missing: the previous release's image (--release, the newest release
// CHANGELOG.md records) and this tree's, both without Grafana and with the test signing keys.
// Runs as root, in a network namespace of its own.
import { createServer } from 'node:http';
import { createReadStream, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort } from '../scripts/lib/ports.mjs';
import { previousRelease } from '../scripts/lib/releases.mjs';
import { ERROR_FILE } from './board/firstboot.mjs';
import { BOOT_BUNDLE, RESULT_FILE, compareVersions } from './board/update.mjs';
import { run } from './lib/host.mjs';
import { rebundle, releaseFolder, untrustedSmallBundle } from './lib/test-bundles.mjs';
import { gatewayStatus, postReadings, questdbCount } from './lib/vm-checks.mjs';
import { startVmTest } from './lib/vm-test.mjs';
import {
  HOST_FROM_GUEST,
  bootFiles,
  bootMachine,
  editPartition,
  instrumentSlot,
  partitionDigest,
  partitions,
  readBootFile,
  waitForHttp,
  writeBootFile,
} from './lib/vm.mjs';

const PROOFS = /** @type {const} */ (['signature', 'install-cuts', 'trial-cut', 'update', 'downgrade', 'broken']);
const args = process.argv.slice(2);
const option = (/** @type {string} */ name) => {
  const index = args.indexOf(name);
  return index >= 0 ? String(args[index + 1]) : undefined;
};
const folderOption = (/** @type {string} */ name) => {
  const value = option(name);
  return value === undefined ? undefined : resolve(value);
};
const chosen = (option('--proofs') ?? PROOFS.join(',')).split(',').filter((name) => name !== '');
const unknown = chosen.filter((name) => !(/** @type {readonly string[]} */ (PROOFS).includes(name)));
if (unknown.length > 0 || chosen.length === 0) {
  process.stderr.write(
    `--proofs takes a comma-separated list of: ${PROOFS.join(', ')}${unknown.length > 0 ? ` (not ${unknown.join(', ')})` : ''}\n`,
  );
  process.exit(2);
}
const proves = (/** @type {(typeof PROOFS)[number]} */ name) => chosen.includes(name);
// What the chain needs: an installation after the first card, and the updated board.
const installs = chosen.some((name) => name !== 'signature' && name !== 'broken');
// The broken release is tried from the updated board when the chain updates, else from the old one.
const updates = proves('update') || proves('downgrade') || (proves('broken') && installs);

// The previous release: the newest CHANGELOG.md records with its commit (tags do not travel).
const OLD_RELEASE = previousRelease().version;
const { say, expect, work, timings, runTest } = startVmTest({
  name: 'update-test',
  // Built outside the namespace: the builds fetch packages.
  prepare: () => {
    releaseFolder({ version: OLD_RELEASE, dir: folderOption('--old') });
    releaseFolder({ dir: folderOption('--new') });
  },
});
const oldRelease = releaseFolder({ version: OLD_RELEASE, dir: folderOption('--old'), build: false });
const newRelease = releaseFolder({ dir: folderOption('--new'), build: false });
expect(compareVersions(newRelease.version, oldRelease.version) > 0, `${newRelease.version} is not newer than ${oldRelease.version}`);
await runTest(async () => {
  say(`proofs: ${chosen.join(', ')}`);
  // The bundles the board is offered besides the good one, made from it.
  const untrusted = proves('signature')
    ? untrustedSmallBundle({ to: join(work, 'untrusted.raucb'), work, version: `${newRelease.version}.2` })
    : undefined;
  // The release's bundle with the emulated board's drop-ins on its slot (lib/vm.mjs).
  const update = installs ? rebundle({ from: newRelease.bundle, to: join(work, 'update.raucb'), work, emulated: true }) : undefined;
  const broken = proves('broken')
    ? rebundle({
        from: newRelease.bundle,
        to: join(work, 'broken.raucb'),
        work,
        version: `${newRelease.version}.1`,
        description: 'a gateway that cannot start',
        // The gateway's bundle replaced by one that fails as a bad release would, at start.
        breakGateway: true,
        emulated: true,
      })
    : undefined;
  say(`bundles made; ${newRelease.version}'s is ${mib(newRelease.bundle)} MiB`);

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
  /**
   * Waits on a running board for U-Boot's choice of slot, checks it, then for the gateway: a board
   * reboots itself after an installation and after a failed trial, so a boot is either a machine
   * started here or the next boot of one already running.
   * @param {import('./lib/vm.mjs').Machine} machine
   * @param {'A' | 'B'} slot
   * @param {string} why
   * @param {{ trial?: boolean, ready?: boolean }} [expected]
   */
  const follow = async (machine, slot, why, { trial, ready = true } = {}) => {
    boot += 1;
    const chosenSlot = await machine.waitFor(
      /booting slot ([AB]) \(partition \d, trial (\d)\)/,
      10 * 60_000,
      'the boot script choosing a slot',
    );
    const started = Date.now();
    const onTrial = chosenSlot[2] === '1';
    expect(
      chosenSlot[1] === slot,
      `boot ${boot} (${why}): U-Boot chose slot ${chosenSlot[1]}, expected ${slot}; console: ${machine.serial}`,
    );
    if (trial !== undefined)
      expect(onTrial === trial, `boot ${boot} (${why}): ${onTrial ? 'on' : 'not on'} trial; console: ${machine.serial}`);
    if (!ready) {
      say(`boot ${boot}: slot ${slot}${onTrial ? ' on trial' : ''} (${why})`);
      return { machine, seconds: 0 };
    }
    await waitForHttp(`${url}/readyz`, 20 * 60_000, machine);
    const seconds = Math.round((Date.now() - started) / 1000);
    say(`boot ${boot}: slot ${slot}${onTrial ? ' on trial' : ''} (${why}), gateway ready ${seconds} s after U-Boot`);
    return { machine, seconds };
  };
  /** Powers the card on. */
  const bootInto = (/** @type {'A' | 'B'} */ slot, /** @type {string} */ why) =>
    follow(
      bootMachine({ disk, serial: join(work, `serial-${boot + 1}.log`), forwards: { [port]: 8000, [questdbPort]: 9000 }, work }),
      slot,
      why,
    );
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
  const proved = (/** @type {(typeof PROOFS)[number]} */ name, /** @type {string} */ what) => {
    timings.push(`proof ${name} passed`);
    say(`proof ${name} passed: ${what}`);
  };

  /**
   * A bundle whose gateway cannot start, installed from the committed slot `home`: tried in the
   * other slot, marked bad, and the board is back on `home` by itself, saying why, nothing lost.
   * On the updated board (slot B) QuestDB then holds every reading once; on the old release's
   * (slot A, QuestDB kept from starting) the queue still holds every one.
   * @param {string} bundle
   * @param {'A' | 'B'} home
   */
  const proveBroken = async (bundle, home) => {
    const other = home === 'A' ? 'B' : 'A';
    writeBootFile(disk, parts.boot, bundle, BOOT_BUNDLE);
    const installing = await bootInto(home, 'a bundle whose gateway cannot start');
    await installing.machine.waitFor(new RegExp(`installed \\S+ into slot ${other}`), 60 * 60_000, 'the broken bundle installed');
    await follow(installing.machine, other, 'the trial of the broken release', { trial: true, ready: false });
    const failedTrial = await installing.machine.waitFor(/the trial of \S+ failed: ([^\n]+)/, 60 * 60_000, 'the trial failing');
    const back = await follow(installing.machine, home, 'back from the failed trial', { trial: false });
    await back.machine.waitFor(/failed and was rolled back/, 5 * 60_000, 'the rollback report');
    const finalStatus = await gatewayStatus(url, apiKey);
    const after = home === 'B' ? await questdbCount({ port: questdbPort, password: questdbPassword, values: answered }) : undefined;
    await cutAndWait(back.machine);
    const result = readBootFile(disk, parts.boot, RESULT_FILE) ?? '';
    expect(/failed and was rolled back.*harbor-gateway\.service/.test(result), `${RESULT_FILE} says: ${result}`);
    if (after === undefined)
      expect(
        finalStatus.queue.readings >= answered.size,
        `after the rollback the queue holds ${finalStatus.queue.readings} readings, ${answered.size} were answered`,
      );
    else
      expect(
        finalStatus.queue.readings === 0 && after.missing.length === 0 && after.rows === answered.size,
        `after the rollback: ${finalStatus.queue.readings} queued, ${after.rows} rows in QuestDB for ${answered.size} answered readings`,
      );
    const left = bootFiles(disk, parts.boot).filter((name) => name.startsWith('harbor-update.raucb'));
    expect(left.length === 0, `the boot partition still holds ${left.join(', ')}`);
    // The card's harbor.conf was fine: the broken release's first boot must not send the technician to it.
    expect(!bootFiles(disk, parts.boot).includes(ERROR_FILE), `the boot partition holds ${ERROR_FILE} after the broken release's trial`);
    say(`the board's reason: ${String(failedTrial[1]).slice(0, 200)}`);
    say(`${RESULT_FILE}: ${result.trim().slice(0, 300)}`);
    proved(
      'broken',
      `the release whose gateway cannot start was tried in slot ${other}, marked bad and rolled back to slot ${home} by the board itself; nothing lost`,
    );
  };

  // The old release, QuestDB unreachable, readings queued; an untrusted bundle from the central tier.
  const first = await bootInto('A', 'first boot of the old release');
  if (untrusted !== undefined) offer.serve(untrusted);
  next = await postReadings({ url, apiKey, from: next, count: 500, answered });
  if (untrusted !== undefined) {
    await first.machine.waitFor(
      /refused http:\/\/\S+: the bundle's signature or format was refused/,
      10 * 60_000,
      'the untrusted bundle refused',
    );
    offer.serve(undefined);
  }
  // Power cut under load.
  const load = postReadings({ url, apiKey, from: next, count: 100_000, answered, stopOnError: true });
  await new Promise((r) => setTimeout(r, 5000));
  await cutAndWait(first.machine);
  next = await load;
  say(`power cut under load with QuestDB unreachable: ${answered.size} readings answered in all`);
  if (untrusted !== undefined) {
    expect(slotB() === emptySlotB && bootState().includes('HARBOR_SLOT=A'), 'the untrusted bundle wrote to slot B or the boot state');
    proved('signature', 'a bundle signed by a key the board does not trust was refused; slot B and the slot files unchanged');
  }
  if (update === undefined) {
    // The broken release alone is tried from the old one.
    if (broken !== undefined) await proveBroken(broken, 'A');
    return;
  }

  // The new bundle on the boot partition.
  writeBootFile(disk, parts.boot, update, BOOT_BUNDLE);
  if (proves('install-cuts')) {
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
  }
  /** Boots slot A with the bundle on the boot partition until it is installed and the board reboots. */
  const installFromBoot = async (/** @type {string} */ why) => {
    const installing = await bootInto('A', why);
    await expectQueueWhole(`boot ${boot}`);
    const started = Date.now();
    await installing.machine.waitFor(/installed \S+ into slot B/, 60 * 60_000, 'the installation completing');
    const seconds = Math.round((Date.now() - started) / 1000);
    say(`installation completed ${seconds} s after the gateway was ready`);
    return { machine: installing.machine, seconds, started };
  };
  let installation = await installFromBoot(
    proves('install-cuts') ? 'after the second cut during installation' : 'the bundle on the boot partition',
  );
  if (proves('install-cuts'))
    proved(
      'install-cuts',
      'two power cuts during the installation: each time slot A booted with the queue whole; the third attempt completed',
    );
  timings.push(`installation from the boot partition (gateway ready to installed): ${installation.seconds} s`);

  if (proves('trial-cut')) {
    await follow(installation.machine, 'B', 'the trial after the installation', { trial: true, ready: false });
    await new Promise((r) => setTimeout(r, 20_000));
    await cutAndWait(installation.machine);
    const back = await bootInto('A', 'after a cut during the trial boot');
    await back.machine.waitFor(/failed and was rolled back.*never confirmed/, 5 * 60_000, 'the report of the unconfirmed trial');
    await expectQueueWhole(`boot ${boot}`);
    await cutAndWait(back.machine);
    expect(
      /never confirmed/.test(readBootFile(disk, parts.boot, RESULT_FILE) ?? ''),
      `${RESULT_FILE} does not say the trial was never confirmed`,
    );
    proved('trial-cut', 'power cut during the trial boot: slot A came back by itself and says the trial was never confirmed');
    writeBootFile(disk, parts.boot, update, BOOT_BUNDLE);
    installation = await installFromBoot('the bundle again');
  }
  if (!updates) {
    await cutAndWait(installation.machine);
    return;
  }

  // The new slot on trial: confirmed once the gateway and QuestDB are ready; every reading delivered once.
  const trial = await follow(installation.machine, 'B', 'trial of the new release', { trial: true });
  await trial.machine.waitFor(/is ready and confirmed/, 45 * 60_000, 'the trial confirmed');
  const updateSeconds = Math.round((Date.now() - installation.started) / 1000);
  const delivered = await waitForDelivery({ url, apiKey, questdbPort, questdbPassword, answered });
  timings.push(
    `update (gateway ready on slot A to the new release confirmed): ${updateSeconds} s; U-Boot to ready on trial: ${trial.seconds} s`,
  );
  proved(
    'update',
    `${newRelease.version} confirmed ${updateSeconds} s after slot A was ready with the bundle; QuestDB holds ${delivered.rows} rows, ${delivered.distinct} distinct, of ${answered.size} answered readings`,
  );

  await cutAndWait(trial.machine);

  if (proves('downgrade')) {
    // The old release offered by the central tier: a downgrade, refused. The address is checked 2 min
    // after a boot that is not a trial (a trial boot installs nothing), so the board boots again.
    const digestA = partitionDigest(disk, parts.rootA);
    const stateBefore = bootState();
    offer.serve(oldRelease.bundle);
    const committed = await bootInto('B', 'the new release, committed, offered the old one');
    await committed.machine.waitFor(/refused http:\/\/\S+: \S+ is older than \S+ \(a downgrade\)/, 15 * 60_000, 'the downgrade refused');
    offer.serve(undefined);
    await cutAndWait(committed.machine);
    expect(
      partitionDigest(disk, parts.rootA) === digestA && bootState() === stateBefore,
      'the refused downgrade wrote to a slot or the boot state',
    );
    proved('downgrade', `${oldRelease.version} offered at UPDATE_URL was refused as a downgrade; nothing written`);
  }

  if (broken !== undefined) await proveBroken(broken, 'B');
  timings.push(`bundle: ${mib(newRelease.bundle)} MiB`);
});

function mib(/** @type {string} */ file) {
  return (statSync(file).size / 2 ** 20).toFixed(0);
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
