// npm run appliance:update-test -- [--proofs LIST] [--old DIR] [--new DIR] [--stress N]: updates over
// the air on an emulated board (lib/vm.mjs), from an earlier release's image to this tree's bundle,
// with every way it can go wrong that a site will meet. One card, one chain of boots; --proofs picks
// some of them (comma-separated; all by default), and the chain then runs only what those need:
//   signature     the old release's card boots with QuestDB kept from starting in its slot
//                 (unreachable for the gateway) while readings queue; the central tier's address
//                 offers a bundle signed with a key the board does not trust: refused, slot B and
//                 the boot state untouched. (Every chain starts on that card, with readings queued
//                 and power cut while they are being sent.)
//   names         the new bundle is copied to the boot partition under its release name, beside a
//                 newer-looking one signed by a key the board does not trust: the release's is
//                 installed, the other refused with the reason on the screen, both removed;
//   install-cuts  power is cut 3 s into the installation, then 20 s into the next attempt: each
//                 time the old slot boots with every answered reading queued, and the installation
//                 starts again; the third attempt completes;
//   trial-cut     power is cut during the trial boot of the new slot: the board comes back on the
//                 old slot by itself and says the trial was never confirmed;
//   handover      the new release on trial takes readings (its QuestDB kept from starting, so the
//                 trial cannot be confirmed) and power is cut: back on the old release, whose queue
//                 format is older, the trial's queue file is set aside and every reading the trial
//                 answered is handed to the old gateway; they reach QuestDB once, after the update;
//   update        the new slot boots on trial, its QuestDB starts, the gateway delivers, the trial
//                 is confirmed; QuestDB holds every answered reading exactly once;
//   downgrade     at the next boot of the updated board (the address is not checked on a trial
//                 boot) the central tier offers the old release: refused as a downgrade, nothing written;
//   rollback      the local console goes back to the previous release (the old one, its QuestDB
//                 now let start): after a confirmation the board restarts into it on trial, hands
//                 the newer queue's readings over, confirms it; QuestDB holds every answered reading once;
//   load          the update, going back and the update again, each trial with --stress N busy
//                 processes (default 2) beside the board: 3 of 3 confirmed;
//   broken        a bundle whose gateway cannot start: installed, tried, marked bad, and the board
//                 is back on the committed slot by itself, saying why in the gateway's own words,
//                 with its queue whole (from the updated board when the chain updates; chosen alone,
//                 from the old release).
// Builds what it needs when missing: the previous release's image (--release, the newest release
// CHANGELOG.md records) and this tree's, both without Grafana and with the test signing keys.
// Runs as root, in a network namespace of its own.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createReadStream, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { freePort } from '../scripts/lib/ports.mjs';
import { previousRelease } from '../scripts/lib/releases.mjs';
import { ERROR_FILE } from './board/firstboot.mjs';
import { RESULT_FILE } from './board/records.mjs';
import { compareVersions } from './board/versions.mjs';
import { run } from './lib/host.mjs';
import { rebundle, releaseFolder, untrustedSmallBundle } from './lib/test-bundles.mjs';
import { consoleSession, gatewayStatus, postReadings, questdbCount } from './lib/vm-checks.mjs';
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
  readPartitionFile,
  waitForHttp,
  writeBootFile,
} from './lib/vm.mjs';

const PROOFS = /** @type {const} */ ([
  'signature',
  'names',
  'install-cuts',
  'trial-cut',
  'handover',
  'update',
  'downgrade',
  'rollback',
  'load',
  'broken',
]);
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
const stressWorkers = Number(option('--stress') ?? 2);
// What the chain needs: an installation after the first card, the updated board, going back.
const installs = chosen.some((name) => name !== 'signature' && name !== 'broken');
const goesBack = proves('rollback') || proves('load');
// The broken release is tried from the updated board when the chain updates, else from the old one.
const updates = installs && chosen.some((name) => !['signature', 'names', 'install-cuts', 'trial-cut'].includes(name));

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
/** A Java option the JVM refuses: QuestDB exits at every start. */
const QUESTDB_CANNOT_START = 'JAVA_OPTS=-XX:+UnknownOptionSoQuestDbCannotStart';
/** Busy processes started beside the board for a trial under load. */
const stress = { running: /** @type {import('node:child_process').ChildProcess[]} */ ([]) };
await runTest(
  async () => {
    say(`proofs: ${chosen.join(', ')}`);
    // The bundles the board is offered besides the good one, made from it.
    const untrusted =
      proves('signature') || proves('names')
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
    // The name a technician copies it under: the release's own.
    const bundleName = `${newRelease.name}.raucb`;

    const disk = join(work, 'disk.img');
    run('cp', ['--sparse=always', oldRelease.image, disk]);
    run('truncate', ['-s', '+4G', disk]);
    const parts = partitions(disk);
    instrumentSlot(disk, parts.rootA, work);
    // QuestDB cannot start in the old slot: the gateway finds it unreachable and queues. Its unit is
    // kept to let it start again before going back to that slot.
    const questdbUnit = join(work, 'harbor-questdb.service');
    writeFileSync(questdbUnit, readPartitionFile(disk, parts.rootA, '/etc/systemd/system/harbor-questdb.service') ?? '');
    editPartition(disk, parts.rootA, [
      'rm /etc/systemd/system/multi-user.target.wants/harbor-questdb.service',
      'rm /etc/systemd/system/harbor-questdb.service',
      'symlink /etc/systemd/system/harbor-questdb.service /dev/null',
    ]);
    // The test reads QuestDB from outside the board: its HTTP port on every address (data partition).
    const questdbEnv = (/** @type {string[]} */ lines) => {
      writeFileSync(join(work, 'questdb.env'), ['QDB_HTTP_BIND_TO=0.0.0.0:9000', ...lines, ''].join('\n'));
      editPartition(disk, parts.data, [
        'rm /lib/harbor-appliance/etc/harbor-gateway/questdb.env',
        `write ${join(work, 'questdb.env')} /lib/harbor-appliance/etc/harbor-gateway/questdb.env`,
      ]);
    };
    questdbEnv([]);

    const bundlePort = await freePort();
    const offer = bundleServer(bundlePort);
    const stamp = Date.now().toString(16);
    const apiKey = `update-test-${stamp}-key`;
    const questdbPassword = `update-test-questdb-${stamp}`;
    const consolePassword = `update-test-console-${stamp}`;
    writeFileSync(
      join(work, 'harbor.conf'),
      [
        'SITE_NAME=Update test',
        'HOSTNAME=gw-update-test',
        `API_KEY=${apiKey}`,
        `QUESTDB_PASSWORD=${questdbPassword}`,
        `CONSOLE_PASSWORD=${consolePassword}`,
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
    const httpsPort = await freePort();
    const url = `http://127.0.0.1:${port}`;
    /** @type {Set<number>} values of every reading the gateway answered 200 */
    const answered = new Set();
    let next = 0;
    let boot = 0;
    /** Trials confirmed while busy processes ran beside the board. */
    const loaded = { tried: 0, confirmed: 0 };
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
        bootMachine({
          disk,
          serial: join(work, `serial-${boot + 1}.log`),
          forwards: { [port]: 8000, [questdbPort]: 9000, [httpsPort]: 443 },
          work,
        }),
        slot,
        why,
      );
    const cutAndWait = async (/** @type {import('./lib/vm.mjs').Machine} */ machine) => {
      machine.cut();
      await machine.exited;
    };
    /** Whether the old slot's QuestDB may start (from going back on): its queue then drains. */
    let oldSlotDelivers = false;
    /** Every answered reading is queued: the power cuts lost none (while the old slot cannot deliver). */
    const expectQueueWhole = async (/** @type {string} */ when) => {
      const status = await gatewayStatus(url, apiKey);
      if (oldSlotDelivers) return status.queue.readings;
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
    /** A trial confirmed (or gone back to), under load when the chain proves it; the seconds it took. */
    const confirmed = async (
      /** @type {import('./lib/vm.mjs').Machine} */ machine,
      /** @type {RegExp} */ pattern,
      /** @type {number} */ since,
    ) => {
      await machine.waitFor(pattern, 45 * 60_000, 'the trial confirmed');
      const seconds = Math.round((Date.now() - since) / 1000);
      if (stress.running.length > 0) {
        loaded.confirmed += 1;
        stopStress();
      }
      return seconds;
    };
    const startStress = () => {
      if (!proves('load')) return;
      loaded.tried += 1;
      for (let i = 0; i < stressWorkers; i++)
        stress.running.push(spawn('nice', ['-n', '10', process.execPath, '-e', 'for (;;);'], { stdio: 'ignore' }));
      say(`${stressWorkers} busy processes beside the board for this trial`);
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
      writeBootFile(disk, parts.boot, bundle, 'broken-release.raucb');
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
      // The gateway's own words, not systemd's restart lines.
      expect(
        /failed and was rolled back.*Why: the gateway stopped: Error: this release cannot start/.test(result),
        `${RESULT_FILE} says: ${result}`,
      );
      expect(!/Scheduled restart|restart counter/.test(result), `${RESULT_FILE} quotes systemd's restart lines: ${result}`);
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
      const left = bootFiles(disk, parts.boot).filter((name) => /\.raucb/i.test(name));
      expect(left.length === 0, `the boot partition still holds ${left.join(', ')}`);
      // The card's harbor.conf was fine: the broken release's first boot must not send the technician to it.
      expect(!bootFiles(disk, parts.boot).includes(ERROR_FILE), `the boot partition holds ${ERROR_FILE} after the broken release's trial`);
      say(`the board's reason: ${String(failedTrial[1]).slice(0, 200)}`);
      say(`${RESULT_FILE}: ${result.trim().slice(0, 300)}`);
      proved(
        'broken',
        `the release whose gateway cannot start was tried in slot ${other}, marked bad and rolled back to slot ${home} by the board itself, in the gateway's words; nothing lost`,
      );
    };

    // The old release, QuestDB unreachable, readings queued; an untrusted bundle from the central tier.
    const first = await bootInto('A', 'first boot of the old release');
    if (proves('signature')) offer.serve(untrusted);
    next = await postReadings({ url, apiKey, from: next, count: 500, answered });
    if (proves('signature')) {
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
    if (proves('signature')) {
      expect(slotB() === emptySlotB && bootState().includes('HARBOR_SLOT=A'), 'the untrusted bundle wrote to slot B or the boot state');
      proved('signature', 'a bundle signed by a key the board does not trust was refused; slot B and the slot files unchanged');
    }
    if (update === undefined) {
      // The broken release alone is tried from the old one.
      if (broken !== undefined) await proveBroken(broken, 'A');
      return;
    }

    // The new bundle on the boot partition under its release's name; with `names`, beside an untrusted one.
    writeBootFile(disk, parts.boot, update, bundleName);
    if (proves('names') && untrusted !== undefined) writeBootFile(disk, parts.boot, untrusted, 'newer-looking.raucb');
    /** The first boot that looks at the boot partition's bundles: the untrusted one refused, and why. */
    const checkNames = async (/** @type {import('./lib/vm.mjs').Machine} */ machine) => {
      if (!proves('names')) return false;
      await machine.waitFor(
        /newer-looking\.raucb was not installed: the bundle's signature or format was refused/,
        15 * 60_000,
        'the untrusted bundle refused',
      );
      return true;
    };
    const namesProved = () =>
      proved(
        'names',
        `${bundleName} found and installed; newer-looking.raucb, signed by a key the board does not trust, refused and why told`,
      );
    if (proves('install-cuts')) {
      for (const [attempt, delay] of /** @type {const} */ ([
        [1, 3],
        [2, 20],
      ])) {
        const { machine } = await bootInto('A', attempt === 1 ? 'the bundle on the boot partition' : 'after a cut during installation');
        const queued = await expectQueueWhole(`boot ${boot}`);
        const named = attempt === 1 && (await checkNames(machine));
        await machine.waitFor(
          new RegExp(`installing ${newRelease.version.replace(/\./g, '\\.')} into slot B`),
          15 * 60_000,
          'the installation starting',
        );
        if (named) namesProved();
        await new Promise((r) => setTimeout(r, delay * 1000));
        await cutAndWait(machine);
        say(`power cut ${delay} s into installation attempt ${attempt} (queue held ${queued} readings)`);
      }
    }
    /** Boots slot A with the bundle on the boot partition until it is installed and the board reboots. */
    let namesChecked = proves('install-cuts');
    const installFromBoot = async (/** @type {string} */ why) => {
      const installing = await bootInto('A', why);
      await expectQueueWhole(`boot ${boot}`);
      const named = !namesChecked && (await checkNames(installing.machine));
      namesChecked = true;
      const started = Date.now();
      await installing.machine.waitFor(/installed \S+ into slot B/, 60 * 60_000, 'the installation completing');
      if (named) namesProved();
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
    const leftBundles = () => bootFiles(disk, parts.boot).filter((name) => /\.raucb/i.test(name));

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
      expect(leftBundles().length === 0, `the boot partition still holds ${leftBundles().join(', ')}`);
      proved('trial-cut', 'power cut during the trial boot: slot A came back by itself and says the trial was never confirmed');
      if (updates || proves('handover')) {
        if (proves('handover')) questdbEnv([QUESTDB_CANNOT_START]);
        writeBootFile(disk, parts.boot, update, bundleName);
        installation = await installFromBoot('the bundle again');
      }
    } else if (proves('handover')) {
      // The trial below must not be confirmed: its QuestDB does not start. The installation above
      // left a trial of slot B to boot, whose QuestDB would start: power is cut during its boot, as in
      // trial-cut, so the board is back on slot A; then, while it is off, the bundle is offered again.
      await follow(installation.machine, 'B', 'the trial after the installation', { trial: true, ready: false });
      await new Promise((r) => setTimeout(r, 20_000));
      await cutAndWait(installation.machine);
      questdbEnv([QUESTDB_CANNOT_START]);
      writeBootFile(disk, parts.boot, update, bundleName);
      installation = await installFromBoot('the bundle again, its trial unable to be confirmed');
    }

    if (proves('handover')) {
      // The new release on trial answers readings into a queue it upgraded; its QuestDB does not
      // start, so it delivers none and cannot be confirmed; the trial ends by a power cut.
      const trial = await follow(installation.machine, 'B', 'a trial whose QuestDB does not start', { trial: true });
      const trialAnswered = new Set();
      next = await postReadings({ url, apiKey, from: next, count: 500, answered: trialAnswered });
      for (const n of trialAnswered) answered.add(n);
      await new Promise((r) => setTimeout(r, 10_000));
      await cutAndWait(trial.machine);
      say(`the trial answered ${trialAnswered.size} readings into the queue it upgraded; power cut`);
      questdbEnv([]);
      const back = await bootInto('A', 'back from the trial cut short, its readings to hand over');
      await back.machine.waitFor(/failed and was rolled back.*put back/, 5 * 60_000, 'the report of the failed trial');
      const handed = await back.machine.waitFor(
        /The (\d+) readings left in the queue of \S+ were handed to \S+/,
        20 * 60_000,
        'the handover',
      );
      const queued = await expectQueueWhole(`boot ${boot}, after the handover`);
      expect(
        Number(handed[1]) === trialAnswered.size,
        `the board handed over ${handed[1]} readings; the trial answered ${trialAnswered.size}`,
      );
      await cutAndWait(back.machine);
      timings.push(`handover: the ${handed[1]} readings the failed trial answered handed to ${oldRelease.version}`);
      say(`the old release's queue holds ${queued} readings with the trial's ${handed[1]}; QuestDB is checked after the update`);
      writeBootFile(disk, parts.boot, update, bundleName);
      installation = await installFromBoot('the bundle once more, after the handover');
    }
    if (!updates) {
      await cutAndWait(installation.machine);
      return;
    }

    // The new slot on trial: confirmed once the gateway and QuestDB are ready; every reading delivered once.
    startStress();
    const trial = await follow(installation.machine, 'B', 'trial of the new release', { trial: true });
    const updateSeconds = await confirmed(trial.machine, /is ready and confirmed/, installation.started);
    const delivered = await waitForDelivery({ url, apiKey, questdbPort, questdbPassword, answered });
    timings.push(
      `update (gateway ready on slot A to the new release confirmed): ${updateSeconds} s; U-Boot to ready on trial: ${trial.seconds} s`,
    );
    proved(
      'update',
      `${newRelease.version} confirmed ${updateSeconds} s after slot A was ready with the bundle; QuestDB holds ${delivered.rows} rows, ${delivered.distinct} distinct, of ${answered.size} answered readings`,
    );
    if (proves('handover'))
      proved(
        'handover',
        `the readings the failed trial answered were handed to ${oldRelease.version}; every one is in QuestDB once (${delivered.rows} rows for ${answered.size} answered)`,
      );
    const leftAfterUpdate = leftBundles();
    expect(leftAfterUpdate.length === 0, `the boot partition still holds ${leftAfterUpdate.join(', ')}`);
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

    if (goesBack) {
      // The old release's QuestDB may start again: going back needs it confirmed.
      oldSlotDelivers = true;
      editPartition(disk, parts.rootA, [
        'rm /etc/systemd/system/harbor-questdb.service',
        `write ${questdbUnit} /etc/systemd/system/harbor-questdb.service`,
        'symlink /etc/systemd/system/multi-user.target.wants/harbor-questdb.service /etc/systemd/system/harbor-questdb.service',
      ]);
      const committed = await bootInto('B', 'the new release, to go back from in the console');
      next = await postReadings({ url, apiKey, from: next, count: 500, answered });
      const session = consoleSession(`https://127.0.0.1:${httpsPort}`);
      expect((await session.login(consolePassword)).status === 303, 'the console password did not log in');
      const settings = await session.request('/console/settings');
      expect(
        new RegExp(`<dd id="previous-release">${oldRelease.version.replace(/\./g, '\\.')} \\(slot A\\)</dd>`).test(settings.html),
        `the settings page does not offer ${oldRelease.version}: ${settings.html.replace(/<[^>]+>/g, ' ').slice(0, 800)}`,
      );
      const asked = await session.post('/console/update/rollback', { to: oldRelease.version });
      expect(
        asked.status === 200 && asked.html.includes(`Go back to ${oldRelease.version}?`),
        `no confirmation was asked: ${asked.status}`,
      );
      startStress();
      const since = Date.now();
      const shown = committed.machine.console().length;
      const done = await session.post('/console/update/rollback', { to: oldRelease.version, confirm: 'yes' });
      expect(
        done.status === 200 && done.html.includes(`Going back to ${oldRelease.version} (slot A)`),
        `going back answered ${done.status}: ${done.html.replace(/<[^>]+>/g, ' ').slice(0, 600)}`,
      );
      const back = await follow(committed.machine, 'A', 'going back to the old release, on trial', { trial: true });
      const seconds = await confirmed(
        back.machine,
        new RegExp(`Went back to ${oldRelease.version.replace(/\./g, '\\.')} in slot A: ready and confirmed`),
        since,
      );
      // The handover runs beside the trial: done before or after the confirmation.
      const handed = await seen(
        back.machine,
        shown,
        /The (\d+) readings left in the queue of \S+ were handed to \S+/,
        20 * 60_000,
        'the handover to the old release',
      );
      say(`going back handed ${handed[1]} readings of the newer queue to ${oldRelease.version}`);
      const rolled = await waitForDelivery({ url, apiKey, questdbPort, questdbPassword, answered });
      timings.push(`going back from the console (confirmed to ${oldRelease.version} confirmed): ${seconds} s`);
      proved(
        'rollback',
        `the console went back to ${oldRelease.version} after a confirmation; confirmed ${seconds} s later; QuestDB holds ${rolled.rows} rows for ${answered.size} answered readings, each once`,
      );
      await cutAndWait(back.machine);
      // And forward again: the update a third time, from the old release.
      writeBootFile(disk, parts.boot, update, bundleName);
      const again = await installFromBoot('the update again after going back');
      startStress();
      const trialAgain = await follow(again.machine, 'B', 'trial of the new release again', { trial: true });
      const againSeconds = await confirmed(trialAgain.machine, /is ready and confirmed/, again.started);
      await waitForDelivery({ url, apiKey, questdbPort, questdbPassword, answered });
      timings.push(`the update again: ${againSeconds} s`);
      await cutAndWait(trialAgain.machine);
    }
    if (proves('load')) {
      expect(loaded.tried === 3 && loaded.confirmed === 3, `${loaded.confirmed} of ${loaded.tried} trials under load confirmed`);
      proved('load', `3 of 3 trials confirmed with ${stressWorkers} busy processes beside the board (update, going back, update again)`);
    }

    if (broken !== undefined) await proveBroken(broken, 'B');
    timings.push(`bundle: ${mib(newRelease.bundle)} MiB`);
  },
  () => stopStress(),
);

/**
 * A line the console showed since position `from`, whether before or after what was last waited for.
 * @param {import('./lib/vm.mjs').Machine} machine
 * @param {number} from
 * @param {RegExp} pattern
 * @param {number} timeoutMs
 * @param {string} what
 */
async function seen(machine, from, pattern, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = machine.console().slice(from).match(pattern);
    if (match !== null) return match;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${Math.round(timeoutMs / 1000)} s; console: ${machine.serial}`);
    await new Promise((r) => setTimeout(r, 2000));
  }
}

function stopStress() {
  for (const child of stress.running.splice(0)) child.kill('SIGKILL');
}

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
