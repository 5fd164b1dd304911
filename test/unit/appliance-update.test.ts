// The appliance's updates over the air, as far as they are decisions on files: the slot files the
// boot script reads and RAUC's backend writes, which bundle may replace which release, what becomes
// of a trial, the queue kept across a trial that upgrades its format, and the device key file that
// first boot writes for the gateway. The emulated board runs them for real (appliance:update-test).
import { lstatSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { backend, parseEnvFile, readBootState } from '../../appliance/board/boot-state.mjs';
import { hashDeviceKey } from '../../appliance/board/firstboot.mjs';
import { parseConfigText, parseDeviceKeys, renderKeyFile, validateSettings } from '../../appliance/board/settings.mjs';
import {
  compareVersions,
  gatewayUnitFailure,
  queueFormatOf,
  raucConfig,
  restoreQueue,
  snapshotQueue,
  trialOutcome,
  versionDecision,
  writeVerdict,
} from '../../appliance/board/update.mjs';
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

describe("the gateway's unit on a trial", () => {
  it('fails the trial on any restart, even once the unit reads success again, and on a failed unit', () => {
    const running = { ActiveState: 'active', SubState: 'running', Result: 'success', ExecMainStatus: '0', NRestarts: '0' };
    expect(gatewayUnitFailure(running)).toBeUndefined();
    expect(gatewayUnitFailure({ ...running, ActiveState: 'activating', SubState: 'start' })).toBeUndefined();
    expect(gatewayUnitFailure({ ...running, ActiveState: 'activating', SubState: 'start', NRestarts: '1' })).toBe(
      'harbor-gateway.service exited and was restarted once, now activating',
    );
    expect(
      gatewayUnitFailure({ ActiveState: 'activating', SubState: 'auto-restart', Result: 'exit-code', ExecMainStatus: '1', NRestarts: '3' }),
    ).toBe('harbor-gateway.service exited and was restarted 3 times, now activating (exit-code, exit status 1)');
    expect(
      gatewayUnitFailure({ ActiveState: 'failed', SubState: 'failed', Result: 'exit-code', ExecMainStatus: '78', NRestarts: '0' }),
    ).toBe('harbor-gateway.service failed (exit-code, exit status 78)');
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

  it('keeps a copy before the trial and gives it back to the older release, setting the newer file aside', () => {
    const state = temp();
    const updates = temp();
    queueFile(state, 4, 3);
    expect(snapshotQueue({ stateDir: state, updateDir: updates, releaseFormat: 5 })).toBe(true);
    // The trial's gateway upgrades the file and takes a reading.
    queueFile(state, 5, 1);
    expect(queueFormatOf(join(state, 'queue.db'))).toBe(5);
    const done = restoreQueue({ stateDir: state, updateDir: updates, now: new Date('2026-11-26T10:00:00Z') });
    expect(done).toMatch(/format 5.*kept in .*format-4 queue/);
    expect(queueFormatOf(join(state, 'queue.db'))).toBe(4);
    const aside = readdirSync(state).find((name) => name.startsWith('queue-format-5-set-aside-'));
    expect(aside).toBeDefined();
    expect(queueFormatOf(join(state, String(aside), 'queue.db'))).toBe(5);
    expect(rowsIn(state)).toEqual({ n: 3 });
  });

  it('copies nothing when the release reads the format as it is, and keeps the queue when the trial left it alone', () => {
    const state = temp();
    const updates = temp();
    queueFile(state, 4, 2);
    expect(snapshotQueue({ stateDir: state, updateDir: updates, releaseFormat: 4 })).toBe(false);
    expect(snapshotQueue({ stateDir: state, updateDir: updates, releaseFormat: 5 })).toBe(true);
    queueFile(state, 4, 1);
    expect(restoreQueue({ stateDir: state, updateDir: updates })).toBeUndefined();
    expect(rowsIn(state)).toEqual({ n: 3 });
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
