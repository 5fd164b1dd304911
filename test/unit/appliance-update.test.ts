// The appliance's updates over the air, as far as they are decisions on files: the slot files the
// boot script reads and RAUC's backend writes, which bundle may replace which release, what becomes
// of a trial, the queue kept across a trial that upgrades its format, and the device key file that
// first boot writes for the gateway. The emulated board runs them for real (appliance:update-test).
import { lstatSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { backend, parseEnvFile, readBootState } from '../../appliance/board/boot-state.mjs';
import { hashDeviceKey } from '../../appliance/board/firstboot.mjs';
import { parseConfigText, parseDeviceKeys, renderKeyFile, validateSettings } from '../../appliance/board/settings.mjs';
import { renderBanner } from '../../appliance/board/banner.mjs';
import { bootBundles, chooseBundle } from '../../appliance/board/boot-bundles.mjs';
import { takeRollbackRequest, writeVerdict } from '../../appliance/board/console-channel.mjs';
import {
  exportPending,
  queueFormatOf,
  replayHandover,
  setAsideAfterTrial,
  setAsideForRollback,
  snapshotQueue,
} from '../../appliance/board/handover.mjs';
import { raucConfig } from '../../appliance/board/rauc.mjs';
import { previousRelease } from '../../appliance/board/rollback.mjs';
import { judgeGateway, readGatewayJournal } from '../../appliance/board/trial.mjs';
import { trialOutcome } from '../../appliance/board/update.mjs';
import { compareVersions, versionDecision } from '../../appliance/board/versions.mjs';
import { parseKeyFile } from '../../src/keys/key-file.js';
import { keyMatches } from '../../src/keys/key-hash.js';
import { tempDir } from '../support/temp-dir.js';

const temp = () => tempDir('update');
const onA = 'root=PARTUUID=1a2b3c4d-02 rauc.slot=A harbor.trial=0';
const onBTrial = 'root=PARTUUID=1a2b3c4d-03 rauc.slot=B harbor.trial=1';
const onB = 'root=PARTUUID=1a2b3c4d-03 rauc.slot=B harbor.trial=0';

/** What the boot script does at power-on: a trial with attempts left spends one and boots it. */
function ubootBoots(boot: string): { slot: 'A' | 'B'; trial: boolean } {
  const state = readBootState(boot);
  if (state.trySlot !== undefined && state.tryLeft > 0) {
    writeFileSync(join(boot, 'harbor-try.env'), `HARBOR_TRY=${state.trySlot}\nHARBOR_TRY_LEFT=${(state.tryLeft - 1).toString(16)}\n\0\0\0`);
    return { slot: state.trySlot, trial: true };
  }
  return { slot: state.slot, trial: false };
}

describe('the slot files (boot-state.mjs as RAUC backend)', () => {
  it('a new card boots slot A; an installed slot is tried once and committed when marked good', () => {
    const boot = temp();
    expect(backend(['get-primary'], { boot, cmdline: onA })).toBe('A');
    // RAUC: the target is marked bad before it is written, primary after.
    backend(['set-state', 'B', 'bad'], { boot, cmdline: onA });
    backend(['set-primary', 'B'], { boot, cmdline: onA });
    expect(backend(['get-primary'], { boot, cmdline: onA })).toBe('B');
    expect(ubootBoots(boot)).toEqual({ slot: 'B', trial: true });
    expect(backend(['get-state', 'B'], { boot, cmdline: onBTrial })).toBe('good');
    backend(['set-state', 'B', 'good'], { boot, cmdline: onBTrial });
    expect(readBootState(boot)).toEqual({ slot: 'B', trySlot: undefined, tryLeft: 0 });
    expect(ubootBoots(boot)).toEqual({ slot: 'B', trial: false });
    expect(backend(['get-current'], { boot, cmdline: onB })).toBe('B');
  });

  it('a trial marked bad, or never confirmed, gives the committed slot back at the next boot', () => {
    const boot = temp();
    backend(['set-primary', 'B'], { boot, cmdline: onA });
    ubootBoots(boot);
    backend(['set-state', 'B', 'bad'], { boot, cmdline: onBTrial });
    expect(ubootBoots(boot)).toEqual({ slot: 'A', trial: false });

    backend(['set-primary', 'B'], { boot, cmdline: onA });
    ubootBoots(boot);
    // Power cut or hang during the trial: nobody marks it, the spent attempt decides.
    expect(ubootBoots(boot)).toEqual({ slot: 'A', trial: false });
    expect(backend(['get-state', 'B'], { boot, cmdline: onA })).toBe('bad');
    expect(backend(['get-primary'], { boot, cmdline: onA })).toBe('A');
  });

  it('an installation cut short leaves no trial: the slot is marked bad before it is written', () => {
    const boot = temp();
    backend(['set-state', 'B', 'bad'], { boot, cmdline: onA });
    expect(ubootBoots(boot)).toEqual({ slot: 'A', trial: false });
  });

  it('reads what U-Boot exports (NUL padding) and takes a damaged file as no trial', () => {
    expect(parseEnvFile('HARBOR_TRY=B\nHARBOR_TRY_LEFT=0\n\0\0')).toEqual({ HARBOR_TRY: 'B', HARBOR_TRY_LEFT: '0' });
    const boot = temp();
    writeFileSync(join(boot, 'harbor-try.env'), 'HARBOR_TRY=\u00ff\u00fe');
    writeFileSync(join(boot, 'harbor-slot.env'), 'HARBOR_SLOT=');
    expect(readBootState(boot)).toEqual({ slot: 'A', trySlot: undefined, tryLeft: 0 });
  });

  it('refuses to mark good a slot that is neither committed nor running', () => {
    const boot = temp();
    expect(() => backend(['set-state', 'B', 'good'], { boot, cmdline: onA })).toThrow(/neither committed nor running/);
  });
});

describe('which bundle may replace which release', () => {
  it('orders releases and development builds as semantic versioning does', () => {
    expect(compareVersions('0.5.0-dev.41', '0.4.0')).toBeGreaterThan(0);
    expect(compareVersions('0.5.0-dev.41', '0.5.0')).toBeLessThan(0);
    expect(compareVersions('0.5.0-dev.9', '0.5.0-dev.41')).toBeLessThan(0);
    expect(compareVersions('0.5.0-dev.41.1', '0.5.0-dev.41')).toBeGreaterThan(0);
    expect(compareVersions('1.0.0+build', '1.0.0')).toBe(0);
  });

  it('refuses a downgrade or the running release unless forced', () => {
    expect(versionDecision('0.5.0', '0.4.0')).toMatchObject({ allowed: false, reason: expect.stringMatching(/downgrade/) });
    expect(versionDecision('0.5.0', '0.5.0')).toMatchObject({ allowed: false });
    expect(versionDecision('0.5.0', '0.4.0', true)).toMatchObject({ allowed: true, reason: expect.stringMatching(/forced/) });
    expect(versionDecision('0.4.0', '0.5.0-dev.3')).toMatchObject({ allowed: true });
  });

  it('tells a trial that failed, one cut short, one pending and one confirmed apart', () => {
    const trial = { from: '0.4.0', to: '0.5.0', slot: 'B' as const, startedAt: '', source: 'x' };
    expect(trialOutcome({ ...trial, status: 'installing' }, { booted: 'A', trialBoot: false })).toBe('interrupted');
    expect(trialOutcome({ ...trial, status: 'installed' }, { booted: 'B', trialBoot: true })).toBe('pending');
    expect(trialOutcome({ ...trial, status: 'installed' }, { booted: 'A', trialBoot: false })).toBe('failed');
    expect(trialOutcome({ ...trial, status: 'failed', reason: 'x' }, { booted: 'A', trialBoot: false })).toBe('failed');
    expect(trialOutcome({ ...trial, status: 'good' }, { booted: 'B', trialBoot: false })).toBe('good');
  });

  it("names the card's slots by the disk id on the kernel command line", () => {
    const conf = raucConfig('console=ttyAMA0 root=PARTUUID=1A2B3C4D-03 rauc.slot=B');
    expect(conf).toMatch(/device=\/dev\/disk\/by-partuuid\/1a2b3c4d-02\ntype=ext4\nbootname=A/);
    expect(conf).toMatch(/device=\/dev\/disk\/by-partuuid\/1a2b3c4d-03\ntype=ext4\nbootname=B/);
    expect(conf).toMatch(/bootloader=custom/);
    expect(() => raucConfig('root=/dev/mmcblk0p2')).toThrow(/PARTUUID/);
  });
});

describe("the gateway's runs on a trial", () => {
  // The journal of harbor-gateway.service as `journalctl --output=json` gives it: systemd's own
  // lines (pid 1) with the fields it adds, the gateway's pino lines and what Node printed.
  const systemd = (MESSAGE: string, fields: Record<string, string> = {}) => ({
    _PID: '1',
    UNIT: 'harbor-gateway.service',
    MESSAGE,
    ...fields,
  });
  const gateway = (MESSAGE: string) => ({ _PID: '812', MESSAGE });
  const active = { ActiveState: 'active', SubState: 'running', Result: 'success', ExecMainStatus: '0' };

  it("fails a release that exits, in the gateway's own words rather than systemd's restart lines", () => {
    const journal = readGatewayJournal([
      gateway('{"level":30,"event":"start","msg":"gateway starting"}'),
      gateway('file:///opt/harbor-gateway/dist/gateway.mjs:1'),
      gateway('Error: this release cannot start: a bundle made by the update test'),
      gateway('    at file:///opt/harbor-gateway/dist/gateway.mjs:1:7'),
      gateway('Node.js v20.19.2'),
      systemd('harbor-gateway.service: Main process exited, code=exited, status=1/FAILURE', { EXIT_STATUS: '1' }),
      systemd("harbor-gateway.service: Failed with result 'exit-code'.", { UNIT_RESULT: 'exit-code' }),
      systemd('harbor-gateway.service: Scheduled restart job, restart counter is at 1.'),
    ]);
    expect(judgeGateway(journal, { ...active, ActiveState: 'activating', SubState: 'auto-restart' })).toEqual({
      failed: 'the gateway stopped: Error: this release cannot start: a bundle made by the update test (exit-code, exit status 1)',
    });
  });

  it('takes the last error the gateway logged, with its cause, and a refused setting', () => {
    const crashed = readGatewayJournal([
      gateway('{"level":50,"event":"questdb_failed","msg":"delivery failed"}'),
      gateway(
        '{"level":60,"event":"start_failed","err":{"message":"EACCES: permission denied, open \'/var/lib/harbor-gateway/queue.db\'"},"msg":"could not start the gateway"}',
      ),
      systemd("harbor-gateway.service: Failed with result 'exit-code'.", { UNIT_RESULT: 'exit-code', EXIT_STATUS: '1' }),
    ]);
    expect(judgeGateway(crashed, { ...active, ActiveState: 'failed' })).toEqual({
      failed:
        "the gateway stopped: could not start the gateway: EACCES: permission denied, open '/var/lib/harbor-gateway/queue.db' (exit-code, exit status 1)",
    });
    const refused = readGatewayJournal([
      gateway('harbor-gateway: invalid configuration: API_KEY is a shipped test value'),
      systemd('harbor-gateway.service: Main process exited, code=exited, status=78/CONFIG'),
      systemd("harbor-gateway.service: Failed with result 'exit-code'."),
    ]);
    expect(judgeGateway(refused, { ...active, ActiveState: 'failed' })).toEqual({
      failed: 'the gateway stopped: harbor-gateway: invalid configuration: API_KEY is a shipped test value (exit-code, exit status 78)',
    });
  });

  it('waits out a gateway systemd restarted because the board was slow, and fails one that then exits', () => {
    const slow = [
      systemd('harbor-gateway.service: start operation timed out. Terminating.'),
      systemd("harbor-gateway.service: Failed with result 'timeout'.", { UNIT_RESULT: 'timeout' }),
      systemd('harbor-gateway.service: Watchdog timeout (limit 30s)!'),
      systemd("harbor-gateway.service: Failed with result 'watchdog'.", { UNIT_RESULT: 'watchdog' }),
    ];
    expect(judgeGateway(readGatewayJournal(slow), active)).toEqual({
      slow: 'systemd restarted the gateway 2 times after a watchdog (the board was slow)',
    });
    expect(judgeGateway(readGatewayJournal([]), active)).toBeUndefined();
    const thenExits = readGatewayJournal([
      ...slow,
      systemd("harbor-gateway.service: Failed with result 'signal'.", { UNIT_RESULT: 'signal' }),
    ]);
    expect(judgeGateway(thenExits, active)).toEqual({ failed: 'the gateway stopped (signal) without a log line saying why' });
  });
});

describe('the queue across a trial that upgrades its format', () => {
  const queueFile = (dir: string, format: number, rows: number) => {
    const db = new Database(join(dir, 'queue.db'));
    db.exec('CREATE TABLE IF NOT EXISTS readings (n INTEGER)');
    for (let i = 0; i < rows; i++) db.prepare('INSERT INTO readings VALUES (?)').run(i);
    db.pragma(`user_version = ${format}`);
    db.close();
  };
  const rowsIn = (dir: string) => {
    const db = new Database(join(dir, 'queue.db'), { readonly: true });
    try {
      return db.prepare('SELECT count(*) AS n FROM readings').get();
    } finally {
      db.close();
    }
  };

  const trial = { from: '0.4.0', to: '0.5.0', slot: 'B' as const, startedAt: '', source: 'x', status: 'failed' as const };

  it('keeps a copy before the trial and gives it back to the older release, setting the newer file aside for a handover', () => {
    const state = temp();
    const updates = temp();
    queueFile(state, 4, 3);
    expect(snapshotQueue({ stateDir: state, updateDir: updates, releaseFormat: 5 })).toBe(true);
    // The trial's gateway upgrades the file and takes a reading.
    queueFile(state, 5, 1);
    expect(queueFormatOf(join(state, 'queue.db'))).toBe(5);
    const done = setAsideAfterTrial({ trial, stateDir: state, updateDir: updates, now: new Date('2026-11-26T10:00:00Z') });
    expect(done?.text).toBe('the trial had upgraded the queue to format 5; the format-4 queue from before it was put back');
    expect(queueFormatOf(join(state, 'queue.db'))).toBe(4);
    expect(rowsIn(state)).toEqual({ n: 3 });
    // The newer file and the copy from before the trial wait for the release of slot B to export what the trial added.
    const dir = join(updates, 'handover', '2026-11-26T10-00-00-000Z');
    expect(done?.dir).toBe(dir);
    expect(queueFormatOf(join(dir, 'queue', 'queue.db'))).toBe(5);
    expect(queueFormatOf(join(dir, 'before', 'queue.db'))).toBe(4);
    expect(JSON.parse(readFileSync(join(dir, 'handover.json'), 'utf8'))).toMatchObject({
      from: '0.5.0',
      to: '0.4.0',
      exporter: 'B',
      after: true,
      state: 'export',
    });
  });

  it('copies nothing when the release reads the format as it is, and keeps the queue when the trial left it alone', () => {
    const state = temp();
    const updates = temp();
    queueFile(state, 4, 2);
    expect(snapshotQueue({ stateDir: state, updateDir: updates, releaseFormat: 4 })).toBe(false);
    expect(snapshotQueue({ stateDir: state, updateDir: updates, releaseFormat: 5 })).toBe(true);
    queueFile(state, 4, 1);
    expect(setAsideAfterTrial({ trial, stateDir: state, updateDir: updates })).toBeUndefined();
    expect(rowsIn(state)).toEqual({ n: 3 });
    expect(readdirSync(updates)).toEqual([]);
  });
});

describe('device keys from harbor.conf', () => {
  it("writes a key file the gateway's own parser reads, whose hashes match the keys", () => {
    const { keys, problems } = parseDeviceKeys('tank-1:7fQ2xLp9RkW4sT8v gps-3:Hm3Zc8Yw1Nq6Bd0e:ship-');
    expect(problems).toEqual([]);
    const parsed = parseKeyFile(renderKeyFile(keys, hashDeviceKey));
    expect(parsed.problems).toEqual([]);
    expect(parsed.entries.map((e) => [e.name, e.shipPrefix])).toEqual([
      ['tank-1', undefined],
      ['gps-3', 'ship-'],
    ]);
    expect(keyMatches(String(parsed.entries[0]?.hash), '7fQ2xLp9RkW4sT8v')).toBe(true);
    expect(keyMatches(String(parsed.entries[1]?.hash), '7fQ2xLp9RkW4sT8v')).toBe(false);
  });

  it('names the bad entry, never the key, and knows none and empty apart', () => {
    const bad = parseDeviceKeys('tank-1:short default:0123456789abcdef0 a:0123456789abcdef0 a:0123456789abcdef1');
    expect(bad.problems).toEqual([
      'DEVICE_KEYS entry 1 (tank-1): the key must be 16-256 printable characters without spaces or :',
      "DEVICE_KEYS entry 2 (default): the name default is API_KEY's",
      'DEVICE_KEYS entry 4 (a): the name is used twice',
    ]);
    expect(bad.problems.join(' ')).not.toMatch(/0123456789abcdef/);
    expect(parseDeviceKeys('none')).toEqual({ keys: [], problems: [] });
    const zone = { zoneExists: () => true };
    expect(validateSettings(parseConfigText('DEVICE_KEYS=\n').values, zone).settings.deviceKeys).toBeUndefined();
    expect(validateSettings(parseConfigText('DEVICE_KEYS=none\n').values, zone).settings.deviceKeys).toEqual([]);
  });

  it('checks the update settings', () => {
    const zone = { zoneExists: () => true };
    const { settings, problems } = validateSettings(
      parseConfigText('UPDATE_URL=https://central.example/site.raucb\nUPDATE_TRIAL_SECONDS=900\n').values,
      zone,
    );
    expect(problems).toEqual([]);
    expect(settings.update).toEqual({ url: 'https://central.example/site.raucb', trialSeconds: 900 });
    expect(validateSettings(parseConfigText('UPDATE_URL=ftp://x\nUPDATE_TRIAL_SECONDS=5\n').values, zone).problems).toHaveLength(2);
  });
});

describe("the verdict on a console upload, in the gateway's folder", () => {
  it('replaces a link left where it goes instead of writing through it', () => {
    const folder = temp();
    const elsewhere = join(temp(), 'precious');
    writeFileSync(elsewhere, 'untouched');
    symlinkSync(elsewhere, join(folder, 'result.json'));
    writeVerdict(folder, { state: 'refused', message: 'Refused, nothing was written: bad signature.' });
    expect(readFileSync(elsewhere, 'utf8')).toBe('untouched');
    expect(lstatSync(join(folder, 'result.json')).isFile()).toBe(true);
    expect(JSON.parse(readFileSync(join(folder, 'result.json'), 'utf8'))).toMatchObject({
      state: 'refused',
      message: 'Refused, nothing was written: bad signature.',
    });
    expect(readdirSync(folder)).toEqual(['result.json']);
  });
});

describe('bundles copied to the boot partition under any name', () => {
  const ok = (version: string) => ({ version, compatible: 'harbor-gateway-arm64' });

  it('finds every .raucb in any case and the one whose installation was cut short', () => {
    const boot = temp();
    for (const name of ['harbor-gateway-0.5.0-debian-arm64.raucb', 'OLD.RAUCB', 'notes.txt', 'x.raucb.installing'])
      writeFileSync(join(boot, name), '');
    expect(bootBundles(boot)).toEqual({
      bundles: ['OLD.RAUCB', 'harbor-gateway-0.5.0-debian-arm64.raucb'],
      interrupted: 'x.raucb.installing',
    });
  });

  it('takes the newest the board may install and says why each other one was not taken', () => {
    const { chosen, refused } = chooseBundle(
      [
        { name: 'a.raucb', manifest: ok('0.5.0-dev.9') },
        { name: 'b.raucb', manifest: ok('0.5.0') },
        { name: 'c.raucb', manifest: { problem: "the bundle's signature or format was refused: signature verification failed" } },
        { name: 'd.raucb', manifest: ok('0.3.0') },
        { name: 'e.raucb', manifest: { version: '0.6.0', compatible: 'other-board' } },
      ],
      '0.4.0',
    );
    expect(chosen).toEqual({ name: 'b.raucb', version: '0.5.0' });
    expect(refused).toEqual([
      { name: 'c.raucb', reason: "the bundle's signature or format was refused: signature verification failed" },
      { name: 'd.raucb', reason: '0.3.0 is older than 0.4.0 (a downgrade)' },
      { name: 'e.raucb', reason: 'it is for other-board, this board is harbor-gateway-arm64' },
      { name: 'a.raucb', reason: '0.5.0-dev.9 is not the newest bundle on the card (b.raucb is 0.5.0)' },
    ]);
    expect(chooseBundle([{ name: 'a.raucb', manifest: ok('0.4.0') }], '0.4.0')).toEqual({
      chosen: undefined,
      refused: [{ name: 'a.raucb', reason: '0.4.0 is the release this board runs' }],
    });
  });
});

describe('going back to the previous release', () => {
  const onB = { slot: 'B' as const, trial: false };
  const confirmed = {
    from: '0.4.0',
    to: '0.5.0',
    slot: 'B' as const,
    startedAt: '',
    source: 'x',
    status: 'good' as const,
    fromQueueFormat: 4,
  };

  it('offers the release the last confirmed update replaced, in the other slot', () => {
    expect(previousRelease({ booted: onB, pending: undefined, last: confirmed })).toEqual({ version: '0.4.0', slot: 'A', queueFormat: 4 });
    // Once gone back, the release left is the previous one.
    const back = { ...confirmed, from: '0.5.0', to: '0.4.0', slot: 'A' as const, kind: 'rollback' as const, fromQueueFormat: 5 };
    expect(previousRelease({ booted: { slot: 'A', trial: false }, pending: undefined, last: back })).toEqual({
      version: '0.5.0',
      slot: 'B',
      queueFormat: 5,
    });
  });

  it('offers none when the other slot holds no confirmed release, or while an update is under way', () => {
    const reason = (state: Parameters<typeof previousRelease>[0]) => (previousRelease(state) as { unavailable: string }).unavailable;
    expect(reason({ booted: onB, pending: undefined, last: undefined })).toMatch(/nothing was installed since the card was flashed/);
    expect(reason({ booted: onB, pending: undefined, last: { ...confirmed, slot: 'A', to: '0.5.1', status: 'failed' } })).toMatch(
      /the other slot holds 0\.5\.1, which was not confirmed/,
    );
    expect(reason({ booted: { slot: 'B', trial: true }, pending: undefined, last: confirmed })).toMatch(/on trial/);
    expect(reason({ booted: onB, pending: { ...confirmed, status: 'installed' }, last: confirmed })).toMatch(/under way/);
  });

  it("takes the console's request only from a plain small file, never through a link", () => {
    const folder = temp();
    writeFileSync(join(folder, 'rollback.request'), '{"to":"0.4.0"}');
    expect(takeRollbackRequest(folder)).toEqual({ to: '0.4.0' });
    expect(readdirSync(folder)).toEqual([]);
    const elsewhere = join(temp(), 'secret');
    writeFileSync(elsewhere, '{"to":"0.4.0"}');
    symlinkSync(elsewhere, join(folder, 'rollback.request'));
    expect(takeRollbackRequest(folder)).toBeUndefined();
    expect(readdirSync(folder)).toEqual([]);
    expect(readFileSync(elsewhere, 'utf8')).toBe('{"to":"0.4.0"}');
  });
});

describe('handing over the readings of a queue file the running release cannot read', () => {
  const batch = (values: number[], site: string | null = null) =>
    JSON.stringify({
      site,
      readings: values.length,
      body: JSON.stringify(values.map((v) => ({ time: `2026-01-01T00:00:00.00000000${v}Z`, ship_id: 's', cargo_id: 'c', value: v }))),
    });
  const handover = (dir: string, lines: string[]) => {
    writeFileSync(join(dir, 'readings.ndjson'), `${lines.join('\n')}\n`);
    return { id: 'h1', from: '0.5.0', to: '0.4.0', exporter: null, after: false, state: 'replay' as const, announcement: '' };
  };
  /** An ingest API that answers from a script, then 200; records what it took. */
  const ingest = (answers: number[] = [], refuses = (_body: string) => false) => {
    const taken: { body: string; site: string | null; key: string }[] = [];
    return {
      taken,
      ready: async () => true,
      wait: async () => {},
      post: async (body: string, site: string | null, key: string) => {
        const status = answers.shift() ?? (refuses(body) ? 422 : 200);
        if (status === 200) taken.push({ body, site, key });
        return { status, text: status === 200 ? '{}' : `answer ${status}` };
      },
    };
  };

  it('sends every batch with its site, waits out answers that mean later, and notes how far it got', async () => {
    const dir = temp();
    const record = handover(dir, [batch([1, 2]), batch([3], 'pier-7')]);
    const api = ingest([503, 0, 429]);
    expect(await replayHandover(dir, record, api)).toBe(0);
    expect(api.taken.map((t) => [JSON.parse(t.body).map((r: { value: number }) => r.value), t.site, t.key])).toEqual([
      [[1, 2], null, 'handover-h1-0'],
      [[3], 'pier-7', 'handover-h1-1'],
    ]);
    expect(readFileSync(join(dir, 'progress'), 'utf8')).toBe('2');
    // Run again after a power cut: nothing is sent twice.
    const again = ingest();
    await replayHandover(dir, record, again);
    expect(again.taken).toEqual([]);
  });

  it('sends a refused batch reading by reading and keeps what is still refused', async () => {
    const dir = temp();
    const record = handover(dir, [batch([1, 2, 3])]);
    const api = ingest([], (body) => body.includes('"value":2') || JSON.parse(body).length > 1);
    expect(await replayHandover(dir, record, api)).toBe(1);
    expect(api.taken.map((t) => JSON.parse(t.body)[0].value)).toEqual([1, 3]);
    const kept = readFileSync(join(dir, 'refused.ndjson'), 'utf8').trim().split('\n');
    expect(kept).toHaveLength(1);
    expect(JSON.parse(String(kept[0]))).toMatchObject({ reading: { value: 2 }, answer: 'answer 422' });
  });

  it('exports before a slot is written, and goes back to nothing changed when going back cannot export', () => {
    const updates = temp();
    const dir = join(updates, 'handover', 'x');
    mkdirSync(join(dir, 'queue'), { recursive: true });
    writeFileSync(
      join(dir, 'handover.json'),
      JSON.stringify({ id: 'x', from: '0.5.0', to: '0.4.0', exporter: 'B', after: true, state: 'export', announcement: '' }),
    );
    const calls: unknown[] = [];
    exportPending({
      updateDir: updates,
      exporter: (slot, where, after) => {
        calls.push([slot, where, after]);
        return { readings: 7, batches: 1, deadLetters: 0 };
      },
    });
    expect(calls).toEqual([['B', dir, true]]);
    expect(JSON.parse(readFileSync(join(dir, 'handover.json'), 'utf8'))).toMatchObject({ state: 'replay', exported: { readings: 7 } });

    const state = temp();
    writeFileSync(join(state, 'queue.db'), 'the queue');
    const failed = setAsideForRollback({
      from: '0.5.0',
      to: '0.4.0',
      stateDir: state,
      updateDir: temp(),
      exporter: () => {
        throw new Error('no space left on device');
      },
    });
    expect(failed).toEqual({ problem: expect.stringContaining('no space left on device') });
    expect(readFileSync(join(state, 'queue.db'), 'utf8')).toBe('the queue');
  });
});

describe("the board's screen", () => {
  it('names the site, the release and its state, the URLs at the address agetty fills in, and the fingerprint', () => {
    const facts = {
      site: 'Pier 7 \\ north',
      hostname: 'gw-pier',
      port: '8000',
      httpsPort: '443',
      fingerprint: 'AB:CD',
      dashboard: false,
      release: { version: '0.5.0', slot: 'B', trial: false },
      previous: { version: '0.4.0', slot: 'A' },
      lastUpdate: '0.4.0 -> 0.5.0, confirmed (2026-11-26 10:00 UTC)',
    };
    expect(renderBanner(facts)).toBe(
      [
        'Harbor Gateway "Pier 7 \\\\ north" on gw-pier (release 0.5.0, slot B, committed)',
        '  Address:  \\4  (also gw-pier.local)',
        '  Ingest:   http://\\4:8000/api/v2/ingest/   https://\\4/api/v2/ingest/',
        '  Console:  https://\\4/console/',
        '  HTTPS certificate SHA-256: AB:CD',
        '  Previous release: 0.4.0 in slot A (the console can go back to it)',
        '  Last update: 0.4.0 -> 0.5.0, confirmed (2026-11-26 10:00 UTC)',
        '',
        '',
      ].join('\n'),
    );
    expect(
      renderBanner({ ...facts, httpsPort: '8443', release: { ...facts.release, trial: true }, previous: { unavailable: 'x' } }),
    ).toMatch(
      /slot B, on trial: kept once its gateway is ready\)[\s\S]*https:\/\/\\4:8443\/console\/[\s\S]*SHA-256: AB:CD\n\s+Last update/,
    );
  });
});
