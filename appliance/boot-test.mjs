// npm run appliance:boot-test -- [RELEASE_DIR]: this tree's card image, booted on an emulated board
// (lib/vm.mjs: qemu's generic arm64 machine, U-Boot and the card's own boot script, kernel and
// services; a Raspberry Pi is not emulated), with the features a site uses, checked from outside as
// devices and technicians see them. One card, three boots:
//   boot 1: first boot applies a harbor.conf with a site name, the API key, two device keys, an
//           upstream (a gateway on the host, as the central tier) and READ_ONLY_ROOT=yes; the screen
//           shows the site, the HTTPS certificate's fingerprint and the generated console password;
//           the local console on 443 takes that password (a wrong one 401), shows the fingerprint
//           and the unsynchronised clock, and refuses an update bundle signed by a key the board
//           does not trust before anything is written; the ESP32 SDK's TLS client
//           (mbedTLS, scripts/lib/esp32-tls-client) posts over HTTPS on 443, where the certificate
//           is the one the console printed; the device keys are accepted, limited to their ships and
//           refused when wrong; the readings reach the board's QuestDB and the upstream; the clock
//           shows unsynchronised until the test's time server answers, then synchronised; power is
//           cut while readings are being sent;
//   boot 2: the screen's banner names the site, the release, the address and the URLs at it and the
//           certificate's fingerprint; every answered reading is in QuestDB exactly once; the root is
//           read-only; /status and the console name the release;
//   boot 3: a new harbor.conf gives the board a static address, and harbor-keys.conf adds, replaces
//           and revokes device keys by name: the screen names the new address, the removed and
//           replaced keys are refused, the new ones accepted, the one left alone still works; the key
//           file is owned by the gateway's dynamic user.
// The local console is checked at boots 1 and 3 (consoleChecks), /status beside it.
// Builds the image when missing (--without-grafana --test-keys). Runs as root, in a network
// namespace of its own: the board reaches only what the test serves.
import { spawnSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { connect } from 'node:tls';
import { buildEsp32TlsClient } from '../scripts/lib/esp32-tls-client/build.mjs';
import { startGatewayProcess } from '../scripts/lib/gateway-process.mjs';
import { freePort } from '../scripts/lib/ports.mjs';
import { repoRoot, run } from './lib/host.mjs';
import { releaseFolder, untrustedSmallBundle } from './lib/test-bundles.mjs';
import { consoleSession, gatewayStatus, postReadings, questdbCount } from './lib/vm-checks.mjs';
import { startVmTest } from './lib/vm-test.mjs';
import { KEYS_APPLIED_FILE, KEYS_FILE } from './board/firstboot.mjs';
import {
  GUEST_DHCP_ADDRESS,
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

const dirArg = process.argv[2] ? resolve(process.argv[2]) : undefined;
const { say, expect, work, timings, runTest } = startVmTest({
  name: 'boot-test',
  // The TLS client, the gateway for the central tier and the image: builds fetch, so before the namespace.
  prepare: () => {
    buildEsp32TlsClient();
    run(process.execPath, [join(repoRoot, 'build.mjs')], { cwd: repoRoot });
    releaseFolder({ dir: dirArg });
  },
});
const release = releaseFolder({ dir: dirArg, build: false });
const esp32 = buildEsp32TlsClient();
/** @type {(() => void)[]} */
const cleanups = [];
await runTest(
  async () => {
    // The central tier: a gateway of this tree on the host side, taking what the board forwards.
    const upstreamKey = `central-${Date.now().toString(16)}-key-0123`;
    const upstream = await startGatewayProcess({
      bundle: join(repoRoot, 'dist/gateway.mjs'),
      env: {
        HOST: '0.0.0.0',
        API_KEY: upstreamKey,
        DATA_DIR: join(work, 'central'),
        QUESTDB_URL: `http://127.0.0.1:${await freePort()}`,
        HEALTH_REPORT: 'false',
      },
    });
    cleanups.push(() => upstream.child.kill('SIGKILL'));
    const upstreamPort = new URL(upstream.url).port;

    const disk = join(work, 'disk.img');
    run('cp', ['--sparse=always', release.image, disk]);
    run('truncate', ['-s', '+4G', disk]);
    const parts = partitions(disk);
    instrumentSlot(disk, parts.rootA, work);
    writeFileSync(join(work, 'questdb.env'), 'QDB_HTTP_BIND_TO=0.0.0.0:9000\n');
    editPartition(disk, parts.data, [`write ${join(work, 'questdb.env')} /lib/harbor-appliance/etc/harbor-gateway/questdb.env`]);

    const stamp = Date.now().toString(16);
    const apiKey = `boot-test-${stamp}-api-key`;
    const questdbPassword = `boot-test-${stamp}-questdb`;
    const keys = { tank: `tank1-${stamp}-key`, gps: `gps2-${stamp}-key`, tankNew: `tank1-${stamp}-new-key`, cam: `cam3-${stamp}-key` };
    const conf = (/** @type {string} */ deviceKeys, /** @type {string[]} */ network = []) =>
      [
        ...network,
        'SITE_NAME=Boot test site',
        'HOSTNAME=gw-boot-test',
        `API_KEY=${apiKey}`,
        `QUESTDB_PASSWORD=${questdbPassword}`,
        `DEVICE_KEYS=${deviceKeys}`,
        `UPSTREAM_URL=http://${HOST_FROM_GUEST}:${upstreamPort}/api/v2/ingest/batch`,
        `UPSTREAM_API_KEY=${upstreamKey}`,
        `NTP_SERVERS=${HOST_FROM_GUEST}`,
        'READ_ONLY_ROOT=yes',
        '',
      ].join('\r\n');
    writeFileSync(join(work, 'harbor.conf'), conf(`tank-1:${keys.tank} gps-2:${keys.gps}:gps-`));
    writeBootFile(disk, parts.boot, join(work, 'harbor.conf'), 'harbor.conf');
    say(`card prepared from ${release.name}; central tier at ${HOST_FROM_GUEST}:${upstreamPort}`);

    const port = await freePort();
    const httpsPort = await freePort();
    const questdbPort = await freePort();
    const url = `http://127.0.0.1:${port}`;
    let boot = 0;
    const start = async (/** @type {string} */ why, guest = GUEST_DHCP_ADDRESS) => {
      boot += 1;
      const machine = bootMachine({
        disk,
        serial: join(work, `serial-${boot}.log`),
        forwards: { [port]: 8000, [httpsPort]: 443, [questdbPort]: 9000 },
        work,
        guest,
      });
      const chosen = await machine.waitFor(/booting slot ([AB])/, 300_000, 'the boot script choosing a slot');
      const ready = await waitForHttp(`${url}/readyz`, 40 * 60_000, machine);
      say(`boot ${boot} (${why}): slot ${chosen[1]}, gateway ready ${ready} s after U-Boot`);
      timings.push(`boot ${boot} (${why}): U-Boot to ready ${ready} s`);
      return machine;
    };
    const answered = new Set();

    // Boot 1.
    const first = await start('first boot');
    const banner = await first.waitFor(
      /HTTPS certificate SHA-256: ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})/,
      60_000,
      'the certificate fingerprint on the console',
    );
    expect(/Harbor Gateway "Boot test site" on gw-boot-test/.test(first.console()), 'the console does not show the site and hostname');
    const consoleFingerprint = String(banner[1]);
    const consolePassword = String(
      (await first.waitFor(/CONSOLE_PASSWORD=(\S+)/, 60_000, 'the generated console password on the screen'))[1],
    );
    expect(consolePassword.length >= 16 && consolePassword !== apiKey, 'the generated console password is short or the API key');
    const untrusted = untrustedSmallBundle({ to: join(work, 'untrusted.raucb'), work, version: '99.0.0' });
    const slotB = partitionDigest(disk, parts.rootB);
    // The board as a technician's browser and a device see it, checked after the first and third boot.
    const board = { url, apiKey, consoleUrl: `https://127.0.0.1:${httpsPort}`, password: consolePassword, fingerprint: consoleFingerprint };
    const status1 = await consoleChecks({ ...board, clock: 'not synchronised', refusedBundle: untrusted });
    expect(status1.clockSynchronized === false, `before any time server answered, clockSynchronized is ${status1.clockSynchronized}`);
    expect(
      status1.tls?.fingerprintSha256 === consoleFingerprint,
      `/status shows certificate ${status1.tls?.fingerprintSha256}, the console ${consoleFingerprint}`,
    );
    const served = await servedFingerprint(httpsPort);
    expect(served === consoleFingerprint, `port 443 serves certificate ${served}, the console printed ${consoleFingerprint}`);
    say(`HTTPS on 443 serves the certificate the console printed (${consoleFingerprint.slice(0, 23)}…); clock unsynchronised`);

    const tlsPost = (/** @type {string} */ key, /** @type {string} */ ship, /** @type {string[]} */ readings) =>
      spawnSync(esp32, ['127.0.0.1', String(httpsPort), '/api/v2/ingest', key, ship, 'batch', ...readings], {
        encoding: 'utf8',
        timeout: 120_000,
      });
    const tls = tlsPost(apiKey, 'esp32-boot-test', ['temperature', '21.5', 'humidity', '40.25']);
    expect(tls.status === 0 && /HTTP\/1\.1 200/.test(tls.stdout), `the ESP32 TLS client got: ${tls.stdout}${tls.stderr}`);
    say(`ESP32 TLS client over 443: ${tls.stdout.split('\n')[0]}, 200`);

    const tank = tlsPost(keys.tank, 'tank-ship', ['level', '3.5']);
    const gpsOwn = tlsPost(keys.gps, 'gps-ship-7', ['speed', '11.5']);
    const gpsOther = tlsPost(keys.gps, 'tank-ship', ['speed', '12.5']);
    const wrong = tlsPost(`wrong-${stamp}-key-xx`, 'tank-ship', ['level', '1']);
    expect(
      /HTTP\/1\.1 200/.test(tank.stdout) && /HTTP\/1\.1 200/.test(gpsOwn.stdout),
      `device keys: tank ${tank.stdout.split('\n')[1]}, gps ${gpsOwn.stdout.split('\n')[1]}`,
    );
    expect(/HTTP\/1\.1 403/.test(gpsOther.stdout), `gps-2 sending another ship: ${gpsOther.stdout.split('\n')[1]}`);
    expect(/HTTP\/1\.1 401/.test(wrong.stdout), `a wrong key: ${wrong.stdout.split('\n')[1]}`);
    say('device keys from harbor.conf: tank-1 and gps-2 accepted, gps-2 refused (403) for a ship outside its prefix, a wrong key 401');

    const tlsRows = await waitFor(
      async () => {
        const counts = await questdbCount({
          port: questdbPort,
          password: questdbPassword,
          values: new Set([21.5, 40.25].map((v) => v)),
          ship: 'esp32-boot-test',
        });
        return counts.rows >= 2 ? counts : undefined;
      },
      30 * 60_000,
      "the TLS readings in the board's QuestDB",
    );
    say(`the readings sent over TLS are in the board's QuestDB (${tlsRows.rows} rows)`);
    const central = await waitFor(
      async () => {
        const status = await gatewayStatus(upstream.url, upstreamKey);
        // The four readings the board answered 200 above: two of the API key's batch, one of each device key.
        return status.totals.acceptedReadings >= 4 ? status : undefined;
      },
      10 * 60_000,
      'the readings at the central tier',
    );
    say(`the upstream (central tier) accepted ${central.totals.acceptedReadings} readings from the board`);

    const ntp = timeServer();
    cleanups.push(() => ntp.close());
    const syncStarted = Date.now();
    await waitFor(
      async () => ((await gatewayStatus(url, apiKey)).clockSynchronized === true ? true : undefined),
      10 * 60_000,
      'clockSynchronized true',
    );
    say(
      `clock synchronised ${Math.round((Date.now() - syncStarted) / 1000)} s after the time server started answering (${ntp.answered()} answers)`,
    );

    const load = postReadings({ url, apiKey, from: 0, count: 1_000_000, answered, stopOnError: true });
    await new Promise((r) => setTimeout(r, 8000));
    first.cut();
    await first.exited;
    await load;
    say(`power cut under load: ${answered.size} readings answered`);

    // Boot 2.
    const second = await start('after the power cut');
    // The screen after a boot that applied nothing: what a technician visiting after a power cut reads.
    await expectBanner(second, GUEST_DHCP_ADDRESS, consoleFingerprint, 'after the power cut');
    const status2 = await gatewayStatus(url, apiKey);
    expect(status2.version === release.version, `/status names version ${status2.version}, the release is ${release.version}`);
    await waitFor(
      async () => ((await gatewayStatus(url, apiKey)).queue.readings === 0 ? true : undefined),
      30 * 60_000,
      'the queue drained',
    );
    const counts = await questdbCount({ port: questdbPort, password: questdbPassword, values: answered });
    expect(
      counts.missing.length === 0,
      `${counts.missing.length} answered readings missing from QuestDB, e.g. ${counts.missing.slice(0, 5).join(', ')}`,
    );
    expect(
      counts.rows === counts.distinct && counts.rows >= answered.size,
      `QuestDB holds ${counts.rows} rows, ${counts.distinct} distinct, ${answered.size} answered`,
    );
    say(`after the power cut every answered reading is in QuestDB exactly once (${counts.rows} rows)`);
    second.cut();
    await second.exited;
    const fstab = readPartitionFile(disk, parts.rootA, '/etc/fstab') ?? '';
    // First boot names the slot's partition in place of /dev/root (settings.mjs, setRootDevice).
    expect(/^\S+\s+\/\s+ext4\s+ro,/m.test(fstab), `the root is not read-only in fstab: ${fstab}`);

    // Boot 3: a static address, and the device keys changed by name.
    const staticAddress = '10.0.2.16';
    writeFileSync(
      join(work, 'harbor.conf'),
      conf('', ['NETWORK=static', `ADDRESS=${staticAddress}/24`, `GATEWAY=${HOST_FROM_GUEST}`, 'DNS=10.0.2.3']),
    );
    writeBootFile(disk, parts.boot, join(work, 'harbor.conf'), 'harbor.conf');
    writeFileSync(join(work, KEYS_FILE), `ADD=tank-1:${keys.tankNew} cam-3:${keys.cam}\r\nREVOKE=gps-2\r\n`);
    writeBootFile(disk, parts.boot, join(work, KEYS_FILE), KEYS_FILE);
    const third = await start('a static address and harbor-keys.conf', staticAddress);
    await expectBanner(third, staticAddress, consoleFingerprint, 'after the address changed');
    const after = {
      tankOld: tlsPost(keys.tank, 'tank-ship', ['level', '4']),
      tankNew: tlsPost(keys.tankNew, 'tank-ship', ['level', '4.5']),
      gps: tlsPost(keys.gps, 'gps-ship-7', ['speed', '13']),
      cam: tlsPost(keys.cam, 'cam-ship', ['frames', '25']),
    };
    const line = (/** @type {{ stdout: string }} */ r) => r.stdout.split('\n')[1] ?? r.stdout;
    expect(
      / 401/.test(line(after.tankOld)) && / 401/.test(line(after.gps)),
      `replaced and removed keys: ${line(after.tankOld)}, ${line(after.gps)}`,
    );
    expect(/ 200/.test(line(after.tankNew)) && / 200/.test(line(after.cam)), `new keys: ${line(after.tankNew)}, ${line(after.cam)}`);
    const status3 = await consoleChecks(board);
    third.cut();
    await third.exited;
    const applied = readBootFile(disk, parts.boot, KEYS_APPLIED_FILE) ?? '';
    expect(
      /new key for tank-1/.test(applied) && /added cam-3/.test(applied) && /revoked gps-2/.test(applied),
      `${KEYS_APPLIED_FILE} says: ${applied}`,
    );
    expect(!bootFiles(disk, parts.boot).includes(KEYS_FILE), `${KEYS_FILE}, which holds keys, is still on the boot partition`);
    expect(partitionDigest(disk, parts.rootB) === slotB, 'slot B was written although the only bundle offered was refused');
    const owner = keyFileOwner(disk, parts.data);
    // Owned as the state directory is: systemd 257 keeps a DynamicUser= service's StateDirectory=
    // owned by "nobody" (65534) on disk and id-maps it to the service's user when it runs (older
    // systemd: the dynamic uid itself, 61184-65519). The keys answering 200 above show the gateway reads it.
    expect(
      owner.file === owner.dir && (owner.file === 65534 || (owner.file >= 61184 && owner.file <= 65519)),
      `the key file is owned by uid ${owner.file}, its folder by ${owner.dir}`,
    );
    say(
      `device keys changed by name in harbor-keys.conf: replaced and revoked keys 401, new ones 200; key file owned as the gateway's state directory (uid ${owner.file} on disk); ${status3.keys.length} keys in /status`,
    );
  },
  () => {
    for (const cleanup of cleanups) cleanup();
  },
);

/**
 * What a technician checks on the board: the local console on 443, logged in with the console
 * password (a wrong one refused), showing the certificate's fingerprint and the clock's state;
 * with refusedBundle, an upload of it refused before anything is written. /status beside it.
 * @param {{ url: string, apiKey: string, consoleUrl: string, password: string, fingerprint: string,
 *   clock?: 'not synchronised', refusedBundle?: string }} options
 */
async function consoleChecks({ url, apiKey, consoleUrl, password, fingerprint, clock, refusedBundle }) {
  const status = await gatewayStatus(url, apiKey);
  expect(status.ready, '/status says not ready');
  const wrong = await consoleSession(consoleUrl).login(`${password}-wrong`);
  expect(wrong.status === 401, `a wrong console password got ${wrong.status}`);
  const session = consoleSession(consoleUrl);
  const login = await session.login(password);
  expect(login.status === 303 && login.location === '/console/', `the console password got ${login.status} to ${login.location}`);
  const overview = await session.request('/console/');
  expect(
    overview.status === 200 && overview.html.includes(fingerprint),
    `the console overview (${overview.status}) does not show ${fingerprint}: ${overview.html.replace(/<[^>]+>/g, ' ').slice(0, 400)}`,
  );
  if (clock !== undefined)
    expect(new RegExp(`<dt>Clock</dt>\\s*<dd>${clock}`).test(overview.html), `the console overview does not say the clock is ${clock}`);
  const settings = await session.request('/console/settings');
  expect(settings.status === 200 && /name="bundle"/.test(settings.html), 'the console has no update upload on the appliance');
  expect(
    new RegExp(`<dd id="release">${status.version.replace(/\./g, '\\.')} \\(slot A, committed\\)</dd>`).test(settings.html) &&
      /<dd id="previous-release">none to go back to: nothing was installed since the card was flashed/.test(settings.html),
    `the console's settings page does not name the release ${status.version}: ${settings.html.replace(/<[^>]+>/g, ' ').slice(0, 800)}`,
  );
  say(`console on 443: the console password logs in, a wrong one 401; fingerprint${clock ? ` and clock (${clock})` : ''} shown`);
  if (refusedBundle !== undefined) {
    const upload = await session.uploadBundle(refusedBundle);
    expect(
      upload.status === 422 &&
        /Refused, nothing was written: the bundle(&#39;|')s signature or format was refused: [^<]*verif/i.test(upload.html),
      `the console upload of a bundle signed by an untrusted key answered ${upload.status}: ${upload.html.replace(/<[^>]+>/g, ' ').slice(0, 600)}`,
    );
    say('console upload of a bundle signed by a key the board does not trust: refused before anything was written');
  }
  return status;
}

/**
 * The screen's banner as a technician reads it at a boot: the site, the host, the release, the
 * address and the URLs at it, the certificate's fingerprint. agetty fills in the address and prints
 * the banner again when it changes, so the one that names `address` is waited for.
 * @param {import('./lib/vm.mjs').Machine} machine
 * @param {string} address
 * @param {string} fingerprint
 * @param {string} when
 */
async function expectBanner(machine, address, fingerprint, when) {
  const at = address.replace(/\./g, '\\.');
  const banner = await machine.waitFor(
    new RegExp(
      `Harbor Gateway "Boot test site" on gw-boot-test \\(release (\\S+), slot A, committed\\)\\s+Address:  ${at} [^\\n]*\\s+Ingest:   http://${at}:8000/api/v2/ingest/   https://${at}/api/v2/ingest/\\s+Console:  https://${at}/console/\\s+HTTPS certificate SHA-256: (\\S+)`,
    ),
    10 * 60_000,
    `the screen's banner at ${address}`,
  );
  expect(banner[1] === release.version, `the screen names release ${banner[1]}, the card holds ${release.version}`);
  expect(banner[2] === fingerprint, `the screen shows certificate ${banner[2]}, the gateway serves ${fingerprint}`);
  say(`the screen ${when}: site, host, release ${banner[1]}, ${address} with the ingest and console URLs, the certificate's fingerprint`);
}

/** The SHA-256 fingerprint of the certificate served on a port, as the console prints it. */
function servedFingerprint(/** @type {number} */ port) {
  return new Promise((resolveFingerprint, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false, servername: 'gw-boot-test.local' }, () => {
      resolveFingerprint(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.once('error', reject);
  });
}

/**
 * A time server for the board: SNTP answers with this machine's clock on UDP 123 of the namespace's
 * loopback, which the board reaches as 10.0.2.2.
 */
function timeServer() {
  const socket = createSocket('udp4');
  let answered = 0;
  socket.on('message', (request, from) => {
    if (request.length < 48) return;
    const reply = Buffer.alloc(48);
    const now = ntpTime();
    reply[0] = (0 << 6) | (4 << 3) | 4; // no leap warning, version 4, server
    reply[1] = 1; // stratum 1: a reference clock
    reply[2] = request[2] ?? 6;
    reply[3] = 0xec; // precision 2^-20 s
    reply.writeUInt32BE(0x10, 8); // root dispersion: 1/4096 s
    reply.write('HOST', 12, 'latin1');
    now.copy(reply, 16);
    request.copy(reply, 24, 40, 48); // origin: the client's transmit time
    now.copy(reply, 32);
    ntpTime().copy(reply, 40);
    socket.send(reply, from.port, from.address);
    answered += 1;
  });
  socket.bind(123, '127.0.0.1');
  return { close: () => socket.close(), answered: () => answered };
}

function ntpTime() {
  const ms = Date.now();
  const buffer = Buffer.alloc(8);
  buffer.writeUInt32BE(Math.floor(ms / 1000) + 2_208_988_800, 0);
  buffer.writeUInt32BE(Math.floor(((ms % 1000) / 1000) * 2 ** 32), 4);
  return buffer;
}

/**
 * @template T
 * @param {() => Promise<T | undefined>} probe
 * @param {number} timeoutMs
 * @param {string} what
 * @returns {Promise<T>}
 */
async function waitFor(probe, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = /** @type {Error} */ (error).message;
    }
    if (Date.now() > deadline) throw new Error(`no ${what} within ${Math.round(timeoutMs / 1000)} s${last ? ` (${last})` : ''}`);
    await new Promise((r) => setTimeout(r, 5000));
  }
}

/** Owners of the gateway's key file and of its folder on the data partition. */
function keyFileOwner(/** @type {string} */ disk, /** @type {import('./lib/vm.mjs').Partition} */ part) {
  const uid = (/** @type {string} */ path) => {
    const result = spawnSync('debugfs', ['-R', `stat ${path}`, `${disk}?offset=${part.start * 512}`], { encoding: 'utf8' });
    const match = /User:\s+(\d+)/.exec(result.stdout);
    if (match === null) throw new Error(`${path} is not on the data partition: ${result.stderr}`);
    return Number(match[1]);
  };
  return { file: uid('/lib/private/harbor-gateway/api-keys'), dir: uid('/lib/private/harbor-gateway') };
}
