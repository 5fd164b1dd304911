// The appliance's first boot: harbor.conf parsing and validation, and what applying it leaves on a
// root tree laid out as the image is (the units and gateway.env of systemd/) and on the boot
// partition. First boot has the real gateway bundle check the settings (check-config); the last test
// starts the bundle in production with what systemd would give harbor-gateway.service: the unit's
// environment, the gateway.env first boot wrote and the credentials the unit loads.
import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import {
  APPLIED_FILE,
  CONFIG_FILE,
  CREDENTIALS_DIR,
  CREDENTIALS_FILE,
  ERROR_FILE,
  GATEWAY_ENV,
  GATEWAY_UNIT,
  GRAFANA_ENV,
  GRAFANA_PASSWORD_FLAG,
  ISSUE,
  KEYS_APPLIED_FILE,
  KEYS_ERROR_FILE,
  KEYS_FILE,
  SLOT_MARKER,
  UPDATE_ENV,
  applyKeyChanges,
  checkGatewayConfig,
  createGatewayCertificate,
  credentialFile,
  credstoreFile,
  firstBoot,
  secretFile,
  type System,
} from '../../appliance/board/firstboot.mjs';
import {
  SECRETS,
  STORED_SECRETS,
  parseConfigText,
  parseEnvText,
  queueBound,
  setRootReadOnly,
  validateSettings,
} from '../../appliance/board/settings.mjs';
import { bannerFacts, renderBanner } from '../../appliance/board/banner.mjs';
import { unitCommand, unitCredentials, unitEnvironment, unitValues, unitWords } from '../../appliance/board/unit.mjs';
import { type AuditEntry, recordAudit } from '../../appliance/board/audit.mjs';
import { installSystemdFiles } from '../../appliance/lib/layout.mjs';
import { parseKeyFile } from '../../src/keys/key-file.js';
import { keyMatches } from '../../src/keys/key-hash.js';
import { ConsoleClient } from '../support/console-client.js';
import { spawnGateway, type GatewayProcess } from '../support/process.js';

const repo = join(import.meta.dirname, '..', '..');
const repoFile = (path: string) => readFileSync(join(repo, path), 'utf8');
const serviceUnits = readdirSync(join(repo, 'systemd')).filter((name) => name.endsWith('.service'));

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const zones = new Set(['UTC', 'Europe/Berlin']);
const validate = (text: string) => validateSettings(parseConfigText(text).values, { zoneExists: (zone) => zones.has(zone) });

describe('harbor.conf parsing', () => {
  it('reads keys and values the way a laptop editor writes them', () => {
    const text =
      '\uFEFF# site\r\nsite_name = "Pier 4, Hamburg"\r\nAPI_KEY=abc#def ghi\r\n\r\n  TIMEZONE=Europe/Berlin  \r\nHARBOR_ID=\'h-1\'';
    const { values, problems } = parseConfigText(text);
    expect(problems).toEqual([]);
    expect(Object.fromEntries(values)).toEqual({
      SITE_NAME: 'Pier 4, Hamburg',
      API_KEY: 'abc#def ghi',
      TIMEZONE: 'Europe/Berlin',
      HARBOR_ID: 'h-1',
    });
  });

  it('reads the template shipped on the boot partition as all defaults', () => {
    const template = readFileSync(join(import.meta.dirname, '..', '..', 'appliance', 'boot', 'harbor.conf'), 'utf8');
    expect(parseConfigText(template).problems).toEqual([]);
    expect(validate(template)).toEqual(validate(''));
  });

  it('names the line of each mistake', () => {
    const { problems } = parseConfigText('TIMEZONE=UTC\nnot a setting\nTIMEZONE=UTC\nAPI-KEY=x\nPASSWORD=x\n');
    expect(problems).toEqual([
      'line 2: expected KEY=value',
      'line 3: TIMEZONE is set twice',
      'line 4: "API-KEY" is not a setting name',
      'line 5: unknown setting PASSWORD',
    ]);
  });
});

describe('harbor.conf validation', () => {
  it('fills in defaults for an empty file', () => {
    const { settings, problems } = validate('');
    expect(problems).toEqual([]);
    expect(settings).toEqual({
      siteName: '',
      hostname: undefined,
      apiKey: undefined,
      questdbPassword: undefined,
      grafanaAdminPassword: undefined,
      consolePassword: undefined,
      harborId: undefined,
      timezone: 'UTC',
      ntpServers: [],
      network: { mode: 'dhcp' },
      readOnlyRoot: false,
      queueMaxBytes: undefined,
      alerts: { email: '', webhookUrl: '', smtpHost: '', smtpFrom: '' },
      forwarding: {},
      storedSecrets: {},
      deviceKeys: undefined,
      update: { url: '', trialSeconds: undefined },
    });
  });

  it('takes alert contacts, and refuses e-mail without a mail server or a webhook that is not http(s)', () => {
    const good = validate(
      'ALERT_EMAIL=ops@pier4.example  chief@pier4.example\nALERT_SMTP_HOST=mail.pier4.lan:25\nALERT_SMTP_FROM=harbor@pier4.example\nALERT_WEBHOOK_URL=https://hooks.pier4.example/alerts',
    );
    expect(good.problems).toEqual([]);
    expect(good.settings.alerts).toEqual({
      email: 'ops@pier4.example;chief@pier4.example',
      webhookUrl: 'https://hooks.pier4.example/alerts',
      smtpHost: 'mail.pier4.lan:25',
      smtpFrom: 'harbor@pier4.example',
    });
    expect(validate('ALERT_EMAIL=ops@pier4.example\nALERT_WEBHOOK_URL=ftp://x\nALERT_SMTP_FROM=nobody').problems).toEqual([
      'ALERT_WEBHOOK_URL must be an http:// or https:// address without spaces or quotes',
      'ALERT_EMAIL needs ALERT_SMTP_HOST, the mail server that sends it',
      'ALERT_SMTP_FROM must be one e-mail address',
    ]);
    expect(validate('ALERT_EMAIL=ops\nALERT_SMTP_HOST=mail:x').problems).toEqual([
      'ALERT_EMAIL must be e-mail addresses (name@example.com) separated by spaces or ;',
      'ALERT_SMTP_HOST must be a mail server as host or host:port, for example mail.site.lan:25',
    ]);
  });

  it('takes a full static configuration', () => {
    const { settings, problems } = validate(
      [
        'HOSTNAME=Gw-Pier4',
        'NETWORK=Static',
        'ADDRESS=192.168.10.20/24',
        'GATEWAY=192.168.10.1',
        'DNS=192.168.10.1, 2001:db8::53',
        'NTP_SERVERS=ntp.pier4.example 192.168.10.1',
        'READ_ONLY_ROOT=yes',
        'QUEUE_MAX_BYTES=2GiB',
      ].join('\n'),
    );
    expect(problems).toEqual([]);
    expect(settings.hostname).toBe('gw-pier4');
    expect(settings.network).toEqual({
      mode: 'static',
      address: '192.168.10.20/24',
      gateway: '192.168.10.1',
      dns: ['192.168.10.1', '2001:db8::53'],
    });
    expect(settings.ntpServers).toEqual(['ntp.pier4.example', '192.168.10.1']);
    expect(settings.readOnlyRoot).toBe(true);
    expect(settings.queueMaxBytes).toBe(2 * GiB);
  });

  it('refuses bad values, naming the setting but never echoing a secret', () => {
    const longKey = `k${'0123456789'.repeat(26)}`;
    const text = [
      'HOSTNAME=-bad-',
      `API_KEY=${longKey}`,
      'GRAFANA_ADMIN_PASSWORD=has spaces in it but long',
      'TIMEZONE=Mars/Olympus',
      'NTP_SERVERS=ntp..example',
      'NETWORK=static',
      'READ_ONLY_ROOT=maybe',
      'QUEUE_MAX_BYTES=1MiB',
    ].join('\n');
    const { settings, problems } = validate(text);
    expect(problems).toEqual([
      'HOSTNAME must be 1-63 letters, digits or inner hyphens (one DNS label)',
      'API_KEY must be at most 256 characters, or empty to have one generated',
      'GRAFANA_ADMIN_PASSWORD may hold printable ASCII characters only, no spaces',
      'TIMEZONE "Mars/Olympus" is not a known time zone (for example Europe/Berlin or UTC)',
      'NTP_SERVERS: "ntp..example" is not a host name or IP address',
      'NETWORK=static needs ADDRESS (for example 192.168.10.20/24)',
      'READ_ONLY_ROOT must be yes or no',
      'QUEUE_MAX_BYTES must be at least 16MiB',
    ]);
    for (const secret of [longKey, 'has spaces in it but long']) expect(problems.join('\n')).not.toContain(secret);
    expect(settings.apiKey).toBeUndefined();
    expect(settings.grafanaAdminPassword).toBeUndefined();
  });

  it("leaves the gateway's own rules to the gateway", () => {
    const { settings, problems } = validate('API_KEY=short\nQUESTDB_PASSWORD=quest\nHARBOR_ID=a/b');
    expect(problems).toEqual([]);
    expect(settings).toMatchObject({ apiKey: 'short', questdbPassword: 'quest', harborId: 'a/b' });
  });

  it('keeps static-only settings out of a DHCP configuration', () => {
    expect(validate('ADDRESS=10.0.0.2/8\nDNS=10.0.0.1').problems).toEqual([
      'ADDRESS applies only with NETWORK=static',
      'DNS applies only with NETWORK=static',
    ]);
    expect(validate('NETWORK=wifi').problems).toEqual(['NETWORK must be dhcp or static']);
    expect(validate('NETWORK=static\nADDRESS=10.0.0.300/8').problems).toEqual([
      'ADDRESS must be an address with its prefix length, for example 192.168.10.20/24',
    ]);
  });
});

describe('the units of systemd/ on the appliance', () => {
  const gatewayUnit = repoFile('systemd/harbor-gateway.service');

  it('load every credential from the file first boot writes it to', () => {
    const written = [
      ...SECRETS.map((secret) => ({ name: secret.credential, path: `/${secretFile(secret)}` })),
      ...STORED_SECRETS.map(({ credential }) => ({ name: credential, path: `/${credstoreFile(credential)}` })),
    ];
    const loaded = serviceUnits.flatMap((unit) => unitCredentials(repoFile(`systemd/${unit}`)));
    expect(loaded.length).toBeGreaterThanOrEqual(SECRETS.length);
    for (const credential of loaded) expect(written).toContainEqual(credential);
    expect(unitCredentials(gatewayUnit)).toEqual(written);
  });

  it('give the gateway the settings file first boot writes, and the command it checks them with', () => {
    expect(unitValues(gatewayUnit, 'EnvironmentFile')).toEqual([`-/${GATEWAY_ENV}`]);
    expect(unitCommand(gatewayUnit)).toEqual(['/usr/bin/node', '/opt/harbor-gateway/dist/gateway.mjs', 'serve']);
    expect(unitEnvironment(gatewayUnit)).toMatchObject({
      GATEWAY_ENV: 'production',
      DATA_DIR: '/var/lib/harbor-gateway',
      QUESTDB_USERNAME: 'admin',
      NODE_OPTIONS: '--max-semi-space-size=8 --max-old-space-size=96',
    });
    expect(unitWords(`a "b \\"c\\" d" 'e f'g`)).toEqual(['a', 'b "c" d', 'e fg']);
  });

  it('are extended by drop-ins of the appliance only where it needs more', () => {
    const dropIns = readdirSync(join(repo, 'appliance/rootfs/etc/systemd/system')).filter((name) => name.endsWith('.d'));
    // RAUC's service takes the configuration written for the card it runs on (update.mjs rauc-config).
    expect(dropIns).toEqual(['harbor-grafana.service.d', 'rauc.service.d']);
    const grafana = repoFile('appliance/rootfs/etc/systemd/system/harbor-grafana.service.d/20-appliance.conf');
    expect(unitEnvironment(grafana)).toEqual({ GF_LOG_MODE: 'console' });
    expect(unitValues(grafana, 'ExecStartPre').join('\n')).toContain(`test ! -e /${GRAFANA_PASSWORD_FLAG} ||`);
    expect(unitCredentials(repoFile('systemd/harbor-grafana.service')).map(({ name }) => name)).toContain('grafana_admin_password');
  });
});

describe('queue bound', () => {
  it('is a quarter of the free space at first boot, in whole MiB', () => {
    expect(queueBound({ requested: undefined, current: undefined, freeBytes: 28 * GiB + 3 })).toEqual({ bytes: 7 * GiB });
  });
  it('keeps the current bound when none is asked for', () => {
    expect(queueBound({ requested: undefined, current: 5 * GiB, freeBytes: GiB })).toEqual({ bytes: 5 * GiB });
  });
  it('takes a requested bound up to half of the free space', () => {
    expect(queueBound({ requested: 4 * GiB, current: undefined, freeBytes: 8 * GiB })).toEqual({ bytes: 4 * GiB });
    expect(queueBound({ requested: 4 * GiB + 1, current: undefined, freeBytes: 8 * GiB })).toEqual({
      problem: 'QUEUE_MAX_BYTES is more than half of the 8192MiB free on the card; at most 4096MiB',
    });
  });
  it('refuses a card without room for a useful queue', () => {
    expect(queueBound({ requested: undefined, current: undefined, freeBytes: 60 * MiB })).toEqual({
      problem: 'only 60MiB free on the card; the queue needs at least 64MiB free',
    });
  });
});

describe('read-only root in fstab', () => {
  const fstab = [
    '# <file system> <mount point> <type> <options> <dump> <pass>',
    'LABEL=harbor-root\t/\text4\tdefaults,noatime,errors=remount-ro\t0\t1',
    'LABEL=harbor-var\t/var\text4\tdefaults,noatime\t0\t2',
    '',
  ].join('\n');
  it('sets ro on the root line only, and takes it away again', () => {
    const readOnly = setRootReadOnly(fstab, true);
    expect(readOnly.split('\n')[1]).toBe('LABEL=harbor-root\t/\text4\tro,noatime,errors=remount-ro\t0\t1');
    expect(readOnly.split('\n')[2]).toBe('LABEL=harbor-var\t/var\text4\tdefaults,noatime\t0\t2');
    expect(setRootReadOnly(readOnly, false).split('\n')[1]).toBe('LABEL=harbor-root\t/\text4\trw,noatime,errors=remount-ro\t0\t1');
  });
});

describe('first boot on a root tree', () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  function makeBoard(freeBytes = 28 * GiB, withGrafana = true, { realAudit = false } = {}) {
    const root = mkdtempSync(join(tmpdir(), 'harbor-firstboot-'));
    roots.push(root);
    const boot = join(root, 'boot/firmware');
    mkdirSync(boot, { recursive: true });
    installSystemdFiles(root, { withGrafana });
    for (const zone of zones) {
      mkdirSync(join(root, 'usr/share/zoneinfo', zone, '..'), { recursive: true });
      writeFileSync(join(root, 'usr/share/zoneinfo', zone), 'TZif');
    }
    mkdirSync(join(root, 'etc'), { recursive: true });
    writeFileSync(join(root, 'etc/machine-id'), '3f9a0c1d2e4b4a6c8d0e1f2a3b4c5d6e\n');
    writeFileSync(join(root, 'etc/fstab'), '/dev/root\t/\text4\trw,noatime\t0\t0\n');
    const calls: string[] = [];
    const logs: string[] = [];
    const audited: AuditEntry[] = [];
    let readOnly = false;
    let gatewayBroken = false;
    const system: System = {
      machineId: () => readFileSync(join(root, 'etc/machine-id'), 'utf8'),
      freeBytes: () => freeBytes,
      growVar: () => calls.push('growVar'),
      setLiveHostname: (name) => calls.push(`hostname ${name}`),
      rootIsReadOnly: () => readOnly,
      rootDevice: () => 'PARTUUID=1a2b3c4d-02',
      remountRoot: (mode) => {
        calls.push(`remount ${mode}`);
        readOnly = mode === 'ro';
      },
      checkGateway: (check) => {
        if (gatewayBroken) return ['the gateway could not check the settings (exit status 1)'];
        // The board runs the unit's Node and bundle; here the suite's build of the same bundle.
        expect(check.command).toEqual(['/usr/bin/node', '/opt/harbor-gateway/dist/gateway.mjs', 'check-config']);
        return checkGatewayConfig({
          ...check,
          command: [process.execPath, inject('bundlePath'), 'check-config'],
          scratch: join(root, 'run'),
        });
      },
      createCertificate: (run) => {
        expect(run.command).toEqual(['/usr/bin/node', '/opt/harbor-gateway/dist/gateway.mjs', 'tls-certificate', '--fingerprint']);
        calls.push('createCertificate');
        return createGatewayCertificate({
          command: [process.execPath, inject('bundlePath'), 'tls-certificate', '--fingerprint'],
          env: { ...run.env, DATA_DIR: join(root, run.env['DATA_DIR']!) },
        });
      },
      audit: (run) => {
        expect(run.command).toEqual(['/usr/bin/node', '/opt/harbor-gateway/dist/gateway.mjs', 'audit', 'record']);
        audited.push(...run.entries);
        if (realAudit)
          recordAudit(run.entries, {
            command: [process.execPath, inject('bundlePath'), 'audit', 'record'],
            env: { ...run.env, DATA_DIR: join(root, run.env['DATA_DIR']!) },
            log: (message) => logs.push(message),
          });
      },
      log: (message) => logs.push(message),
    };
    let counter = 0;
    const newSecret = () => `generated-secret-${++counter}-0123456789abcdef`;
    const boot1 = (now = new Date('2026-11-21T10:00:00Z')) => firstBoot({ root, boot, system, now, newSecret });
    const read = (path: string) => readFileSync(join(root, path), 'utf8');
    const leftInRun = () =>
      existsSync(join(root, 'run')) ? readdirSync(join(root, 'run')).filter((name) => name.startsWith('harbor-firstboot-')) : [];
    return {
      root,
      boot,
      calls,
      logs,
      audited,
      system,
      boot1,
      read,
      leftInRun,
      setReadOnly: (value: boolean) => (readOnly = value),
      breakGateway: () => (gatewayBroken = true),
    };
  }

  it('configures a board that boots without harbor.conf: generated secrets, shown once', () => {
    const board = makeBoard();
    // systemd may start it with a strict umask; modes must not depend on it.
    const umask = process.umask(0o077);
    const result = (() => {
      try {
        return board.boot1();
      } finally {
        process.umask(umask);
      }
    })();
    expect(result).toEqual({
      status: 'applied',
      problems: [],
      generated: ['API_KEY', 'QUESTDB_PASSWORD', 'GRAFANA_ADMIN_PASSWORD', 'CONSOLE_PASSWORD'],
    });
    expect(board.calls).toEqual(['growVar', 'hostname harbor-3f9a0c', 'createCertificate']);
    expect(board.read('etc/hostname')).toBe('harbor-3f9a0c\n');
    expect(board.read('etc/hosts')).toContain('127.0.1.1\tharbor-3f9a0c');
    // Services read these as their own users.
    for (const path of ['etc/hosts', 'etc/hostname', 'etc/systemd/network/10-harbor.network', GATEWAY_ENV]) {
      expect(statSync(join(board.root, path)).mode & 0o777).toBe(0o644);
    }
    expect(readlinkSync(join(board.root, 'etc/localtime'))).toBe('/usr/share/zoneinfo/UTC');
    expect(board.read('etc/systemd/network/10-harbor.network')).toContain('DHCP=yes');
    expect(existsSync(join(board.root, 'etc/systemd/timesyncd.conf.d/10-harbor.conf'))).toBe(false);
    // systemd/gateway.env with its documentation kept and harbor.conf's settings below their defaults.
    const gatewayEnv = board.read(GATEWAY_ENV).split('\n');
    for (const line of repoFile('systemd/gateway.env').split('\n')) expect(gatewayEnv).toContain(line);
    expect(parseEnvText(board.read(GATEWAY_ENV))).toEqual({ QUEUE_MAX_BYTES: String(7 * GiB), GATEWAY_NAME: 'harbor-3f9a0c' });
    expect(gatewayEnv[gatewayEnv.indexOf(`QUEUE_MAX_BYTES=${7 * GiB}`) - 1]).toBe('#QUEUE_MAX_BYTES=1GiB');
    expect(gatewayEnv[gatewayEnv.indexOf('GATEWAY_NAME="harbor-3f9a0c"') - 1]).toBe('#GATEWAY_NAME=');
    expect(statSync(join(board.root, 'etc/harbor-gateway')).mode & 0o777).toBe(0o755);
    expect(statSync(join(board.root, CREDENTIALS_DIR)).mode & 0o777).toBe(0o700);
    expect(statSync(join(board.root, 'etc/credstore')).mode & 0o777).toBe(0o700);
    SECRETS.forEach((secret, index) => {
      const path = join(board.root, secretFile(secret));
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(readFileSync(path, 'utf8')).toBe(`generated-secret-${index + 1}-0123456789abcdef`);
    });
    expect(board.leftInRun()).toEqual([]);
    const shown = readFileSync(join(board.boot, CREDENTIALS_FILE), 'utf8');
    expect(shown).toContain('API_KEY=generated-secret-1-0123456789abcdef');
    expect(shown).toContain('GRAFANA_ADMIN_PASSWORD=generated-secret-3-0123456789abcdef');
    expect(board.read(ISSUE)).toContain('QUESTDB_PASSWORD=generated-secret-2-0123456789abcdef');
    // The console password is shown as the device key is, and the console's address beside it.
    expect(board.read(credstoreFile('console_password'))).toBe('generated-secret-4-0123456789abcdef');
    expect(shown).toContain('CONSOLE_PASSWORD=generated-secret-4-0123456789abcdef');
    expect(board.read(ISSUE)).toContain('CONSOLE_PASSWORD=generated-secret-4-0123456789abcdef');
    // The screen's banner, written at every boot, names the console at the board's address.
    const banner = renderBanner(bannerFacts({ root: board.root, cmdline: 'rauc.slot=A harbor.trial=0' }));
    expect(banner).toContain('on harbor-3f9a0c (release ');
    expect(banner).toContain('Console:  https://\\4/console/   Dashboard: http://\\4:3000/');
    expect(banner).toContain('Ingest:   http://\\4:8000/api/v2/ingest/   https://\\4/api/v2/ingest/');
    // The certificate the gateway will serve, made by the gateway itself, its fingerprint on the screen.
    const fingerprint = /HTTPS certificate SHA-256: ((?:[0-9A-F]{2}:){31}[0-9A-F]{2})\n/.exec(banner)?.[1];
    expect(fingerprint).toBeDefined();
    expect(new X509Certificate(board.read('var/lib/harbor-gateway/tls/cert.pem')).fingerprint256).toBe(fingerprint);
    expect(statSync(join(board.root, 'var/lib/harbor-gateway/tls/key.pem')).mode & 0o777).toBe(0o600);
    expect(board.logs.join('\n')).not.toMatch(/generated-secret/);

    // The next boot deletes the one-time file and changes nothing else.
    const before = board.read(GATEWAY_ENV);
    expect(board.boot1()).toEqual({ status: 'unchanged', problems: [], generated: [] });
    expect(existsSync(join(board.boot, CREDENTIALS_FILE))).toBe(false);
    expect(board.read(GATEWAY_ENV)).toBe(before);
    expect(board.calls).toEqual(['growVar', 'hostname harbor-3f9a0c', 'createCertificate']);
  });

  it('names neither Grafana nor its password on an image without Grafana', () => {
    const board = makeBoard(28 * GiB, false);
    expect(board.boot1().generated).toContain('GRAFANA_ADMIN_PASSWORD');
    // The gateway's unit loads the credential, so it is written; nothing shows it.
    expect(board.read(credentialFile('grafana_admin_password'))).toMatch(/^generated-secret-/);
    const shown = readFileSync(join(board.boot, CREDENTIALS_FILE), 'utf8');
    for (const text of [shown, board.read(ISSUE)]) {
      expect(text).toContain('API_KEY=generated-secret-1-0123456789abcdef');
      expect(text).not.toMatch(/grafana|dashboard|:3000/i);
    }
  });

  it('applies a technician’s harbor.conf, removes it and leaves an editable copy without secrets', () => {
    const board = makeBoard();
    const conf = [
      'SITE_NAME=Pier 4 "north"',
      'HOSTNAME=gw-pier4',
      'API_KEY=pier4-sensor-key-0123456789',
      'QUESTDB_PASSWORD=pier4-questdb-0123456789',
      'GRAFANA_ADMIN_PASSWORD=pier4-grafana-0123456789',
      'CONSOLE_PASSWORD=pier4-console-0123456789',
      'METRICS_TOKEN=pier4-metrics-0123456789',
      'HARBOR_ID=pier4',
      'TIMEZONE=Europe/Berlin',
      'NTP_SERVERS=192.168.10.1',
      'NETWORK=static',
      'ADDRESS=192.168.10.20/24',
      'GATEWAY=192.168.10.1',
      'DNS=192.168.10.1',
      'QUEUE_MAX_BYTES=3GiB',
      'ALERT_WEBHOOK_URL=http://alerts.pier4.lan/harbor',
    ].join('\r\n');
    writeFileSync(join(board.boot, CONFIG_FILE), conf);
    expect(board.boot1()).toEqual({ status: 'applied', problems: [], generated: [] });
    expect(existsSync(join(board.boot, CONFIG_FILE))).toBe(false);
    expect(existsSync(join(board.boot, CREDENTIALS_FILE))).toBe(false);
    expect(board.read(credentialFile('api_key'))).toBe('pier4-sensor-key-0123456789');
    expect(board.read(credstoreFile('console_password'))).toBe('pier4-console-0123456789');
    expect(board.read(credstoreFile('metrics_token'))).toBe('pier4-metrics-0123456789');
    expect(statSync(join(board.root, credstoreFile('console_password'))).mode & 0o777).toBe(0o600);
    expect(board.read('etc/systemd/network/10-harbor.network')).toBe(
      '# Written by harbor-firstboot from harbor.conf.\n[Match]\nType=ether\n\n[Network]\nAddress=192.168.10.20/24\nGateway=192.168.10.1\nDNS=192.168.10.1\nMulticastDNS=yes\n',
    );
    expect(board.read('etc/systemd/timesyncd.conf.d/10-harbor.conf')).toContain('NTP=192.168.10.1');
    expect(board.read('etc/machine-info')).toBe('PRETTY_HOSTNAME="Pier 4 \\"north\\""\n');
    expect(board.read(GATEWAY_ENV)).toContain('\nGATEWAY_NAME="Pier 4 \\"north\\""\n');
    expect(parseEnvText(board.read(GATEWAY_ENV))).toEqual({
      QUEUE_MAX_BYTES: String(3 * GiB),
      GATEWAY_NAME: 'Pier 4 "north"',
      HARBOR_ID: 'pier4',
    });
    expect(parseEnvText(board.read(GRAFANA_ENV))).toEqual({ ALERT_WEBHOOK_URL: 'http://alerts.pier4.lan/harbor' });
    // A setting written into gateway.env by hand is kept when harbor.conf is applied again.
    appendFileSync(join(board.root, GATEWAY_ENV), 'RETENTION_DAYS=90\n');

    const applied = readFileSync(join(board.boot, APPLIED_FILE), 'utf8');
    for (const secret of ['pier4-sensor-key', 'pier4-questdb', 'pier4-grafana', 'pier4-console', 'pier4-metrics'])
      expect(applied).not.toContain(secret);
    // The copy is itself a valid harbor.conf that changes nothing when applied again.
    expect(validate(applied).problems).toEqual([]);
    writeFileSync(join(board.boot, CONFIG_FILE), applied.replace('TIMEZONE=Europe/Berlin', 'TIMEZONE=UTC'));
    expect(board.boot1()).toEqual({ status: 'applied', problems: [], generated: [] });
    expect(readlinkSync(join(board.root, 'etc/localtime'))).toBe('/usr/share/zoneinfo/UTC');
    expect(board.read(credentialFile('api_key'))).toBe('pier4-sensor-key-0123456789');
    expect(board.read(credstoreFile('console_password'))).toBe('pier4-console-0123456789');
    expect(board.read(credstoreFile('metrics_token'))).toBe('pier4-metrics-0123456789');
    expect(parseEnvText(board.read(GATEWAY_ENV))).toEqual({
      QUEUE_MAX_BYTES: String(3 * GiB),
      GATEWAY_NAME: 'Pier 4 "north"',
      HARBOR_ID: 'pier4',
      RETENTION_DAYS: '90',
    });
    expect(existsSync(join(board.root, GRAFANA_PASSWORD_FLAG))).toBe(false);

    // A harbor.conf is the whole configuration: an empty HARBOR_ID (any id) takes its line away,
    // no SITE_NAME or HOSTNAME names the gateway by the card's own hostname.
    writeFileSync(join(board.boot, CONFIG_FILE), 'HARBOR_ID=\n');
    expect(board.boot1().status).toBe('applied');
    expect(parseEnvText(board.read(GATEWAY_ENV))).toEqual({
      QUEUE_MAX_BYTES: String(3 * GiB),
      GATEWAY_NAME: 'harbor-3f9a0c',
      RETENTION_DAYS: '90',
    });
    // No ALERT_* setting: nobody is notified any more.
    expect(parseEnvText(board.read(GRAFANA_ENV))).toEqual({});
  });

  it('adds and revokes device keys by name from harbor-keys.conf, keeping the others, and changes nothing when it is wrong', () => {
    const board = makeBoard();
    writeFileSync(
      join(board.boot, CONFIG_FILE),
      ['API_KEY=pier9-sensor-key-0123456789', 'DEVICE_KEYS=tank-1:tank1-key-0123456789 gps-2:gps2-key-0123456789:gps-'].join('\r\n'),
    );
    expect(board.boot1().status).toBe('applied');
    board.audited.splice(0);
    const keyFile = 'var/lib/harbor-gateway/api-keys';
    // A field the gateway's own tools write (a central gateway's key for one site) is kept as it is.
    appendFileSync(join(board.root, keyFile), `site-9 ${parseKeyFile(board.read(keyFile)).entries[0]?.hash} site=Pier%209\n`);
    const keysBefore = board.read(keyFile);

    // A mistake: nothing changes, the file stays for the technician to fix, the error names the line, never a key.
    writeFileSync(join(board.boot, KEYS_FILE), 'ADD=cam-3:short\r\nREVOKE=tank-1\r\n');
    expect(applyKeyChanges({ root: board.root, boot: board.boot, system: board.system })).toBe('invalid');
    expect(board.read(keyFile)).toBe(keysBefore);
    expect(board.audited.splice(0).map((e) => [e.action, e.outcome, e.actor])).toEqual([
      ['settings_applied', 'refused', 'harbor-keys.conf'],
    ]);
    expect(existsSync(join(board.boot, KEYS_FILE))).toBe(true);
    const error = readFileSync(join(board.boot, KEYS_ERROR_FILE), 'utf8');
    expect(error).toContain('ADD entry 1 (cam-3): the key must be 16-256 printable characters');
    expect(error).not.toContain('short');

    writeFileSync(
      join(board.boot, KEYS_FILE),
      '# two new cameras, a new key for the GPS, the tank retired\r\nADD=cam-3:cam3-key-0123456789 cam-4:cam4-key-0123456789:cam- gps-2:gps2-new-key-0123456789\r\nREVOKE=tank-1 crane-7\r\n',
    );
    expect(applyKeyChanges({ root: board.root, boot: board.boot, system: board.system })).toBe('applied');
    // In the gateway's audit trail by name, never a key.
    expect(board.audited.splice(0).map((e) => [e.action, e.actor, e.subject, e.detail])).toEqual([
      ['key_revoked', 'harbor-keys.conf', 'gps-2', 'replaced by harbor-keys.conf'],
      ['key_added', 'harbor-keys.conf', 'gps-2', 'all ships'],
      ['key_added', 'harbor-keys.conf', 'cam-3', 'all ships'],
      ['key_added', 'harbor-keys.conf', 'cam-4', 'ships starting with cam-'],
      ['key_revoked', 'harbor-keys.conf', 'tank-1', 'revoked in harbor-keys.conf'],
    ]);
    const keys = parseKeyFile(board.read(keyFile));
    expect(keys.problems).toEqual([]);
    expect(keys.entries.map((entry) => [entry.name, entry.shipPrefix, entry.site])).toEqual([
      ['site-9', undefined, 'Pier 9'],
      ['cam-3', undefined, undefined],
      ['cam-4', 'cam-', undefined],
      ['gps-2', undefined, undefined],
    ]);
    const hash = (name: string) => String(keys.entries.find((entry) => entry.name === name)?.hash);
    expect(keyMatches(hash('cam-3'), 'cam3-key-0123456789')).toBe(true);
    expect(keyMatches(hash('gps-2'), 'gps2-new-key-0123456789')).toBe(true);
    expect(keyMatches(hash('gps-2'), 'gps2-key-0123456789')).toBe(false);
    expect(statSync(join(board.root, keyFile)).mode & 0o777).toBe(0o600);
    // The drop-in held keys: gone, and what was done is said by name only.
    expect(existsSync(join(board.boot, KEYS_FILE))).toBe(false);
    expect(existsSync(join(board.boot, KEYS_ERROR_FILE))).toBe(false);
    const applied = readFileSync(join(board.boot, KEYS_APPLIED_FILE), 'utf8');
    expect(applied.split('\r\n').slice(1)).toEqual([
      'added cam-3',
      'added cam-4',
      'new key for gps-2',
      'revoked tank-1',
      'no key named crane-7 to revoke',
      '',
    ]);
    expect(applied).not.toMatch(/key-0123456789/);
  });

  it('writes device keys for the gateway, and gives a slot an update wrote the settings last applied', () => {
    const board = makeBoard(28 * GiB, true, { realAudit: true });
    const conf = [
      'SITE_NAME=Pier 9',
      'HOSTNAME=gw-pier9',
      'API_KEY=pier9-sensor-key-0123456789',
      'TIMEZONE=Europe/Berlin',
      'NTP_SERVERS=192.168.10.1',
      'DEVICE_KEYS=tank-1:tank1-key-0123456789 gps-2:gps2-key-0123456789:gps-',
      'UPDATE_URL=https://central.example/pier9.raucb',
    ];
    writeFileSync(join(board.boot, CONFIG_FILE), conf.join('\r\n'));
    expect(board.boot1().status).toBe('applied');
    const keyFile = 'var/lib/harbor-gateway/api-keys';
    const keys = parseKeyFile(board.read(keyFile));
    expect(keys.problems).toEqual([]);
    expect(keys.entries.map((entry) => [entry.name, entry.shipPrefix])).toEqual([
      ['tank-1', undefined],
      ['gps-2', 'gps-'],
    ]);
    expect(keyMatches(String(keys.entries[0]?.hash), 'tank1-key-0123456789')).toBe(true);
    expect(board.read(keyFile)).not.toContain('tank1-key');
    expect(statSync(join(board.root, keyFile)).mode & 0o777).toBe(0o600);
    // The gateway's user owns its state folder; the key file gets the folder's owner.
    expect(statSync(join(board.root, keyFile)).uid).toBe(statSync(join(board.root, 'var/lib/harbor-gateway')).uid);
    expect(parseEnvText(board.read(UPDATE_ENV))).toEqual({ UPDATE_URL: 'https://central.example/pier9.raucb' });
    // The root line names the slot's partition, so it is checked at boot.
    expect(board.read('etc/fstab')).toBe('PARTUUID=1a2b3c4d-02\t/\text4\trw,noatime\t0\t1\n');
    // In the gateway's audit trail, through its own command: the keys added and the settings applied.
    expect(board.audited.splice(0).map((e) => [e.action, e.outcome, e.actor, e.subject ?? null])).toEqual([
      ['key_added', 'ok', 'harbor.conf', 'tank-1'],
      ['key_added', 'ok', 'harbor.conf', 'gps-2'],
      ['settings_applied', 'ok', 'harbor.conf', 'gw-pier9'],
    ]);
    const trail = () =>
      JSON.parse(
        execFileSync(
          process.execPath,
          [inject('bundlePath'), 'audit', 'list', '--json', '--data-dir', join(board.root, 'var/lib/harbor-gateway')],
          {
            encoding: 'utf8',
          },
        ),
      ) as { action: string; subject: string | null; detail: string | null }[];
    expect(trail().map((e) => [e.action, e.subject])).toEqual([
      ['settings_applied', 'gw-pier9'],
      ['key_added', 'gps-2'],
      ['key_added', 'tank-1'],
    ]);
    expect(trail()[1]!.detail).toBe('ships starting with gps-');
    const trailFile = readFileSync(join(board.root, 'var/lib/harbor-gateway/audit.db')).toString('latin1');
    for (const secret of ['tank1-key-0123456789', 'gps2-key-0123456789', 'pier9-sensor-key-0123456789'])
      expect(trailFile).not.toContain(secret);

    // The same keys again: their lines are kept as they are, and nothing is said of them.
    const linesBefore = board.read(keyFile);
    writeFileSync(join(board.boot, CONFIG_FILE), conf.join('\r\n'));
    expect(board.boot1().status).toBe('applied');
    expect(board.read(keyFile)).toBe(linesBefore);
    expect(board.audited.splice(0).map((e) => e.action)).toEqual(['settings_applied']);

    // An update wrote the other slot: its /etc is the image's; the data partition is the site's.
    const keysBefore = board.read(keyFile);
    rmSync(join(board.root, SLOT_MARKER));
    rmSync(join(board.root, 'etc/hostname'));
    rmSync(join(board.root, 'etc/localtime'));
    rmSync(join(board.root, 'etc/systemd/timesyncd.conf.d'), { recursive: true });
    expect(board.boot1().status).toBe('applied');
    expect(board.read('etc/hostname')).toBe('gw-pier9\n');
    expect(readlinkSync(join(board.root, 'etc/localtime'))).toBe('/usr/share/zoneinfo/Europe/Berlin');
    expect(board.read('etc/systemd/timesyncd.conf.d/10-harbor.conf')).toContain('NTP=192.168.10.1');
    expect(board.read(credentialFile('api_key'))).toBe('pier9-sensor-key-0123456789');
    expect(board.read(keyFile)).toBe(keysBefore);
    expect(parseEnvText(board.read(UPDATE_ENV))).toEqual({ UPDATE_URL: 'https://central.example/pier9.raucb' });
    expect(board.calls.filter((call) => call === 'growVar')).toHaveLength(1);
    expect(board.boot1().status).toBe('unchanged');

    expect(board.audited.splice(0).map((e) => [e.action, e.detail])).toEqual([
      ['settings_applied', expect.stringMatching(/^the settings last applied, on a slot an update wrote/)],
    ]);

    // DEVICE_KEYS=none revokes them all.
    writeFileSync(join(board.boot, CONFIG_FILE), [...conf.slice(0, 5), 'DEVICE_KEYS=none'].join('\r\n'));
    expect(board.boot1().status).toBe('applied');
    expect(parseKeyFile(board.read(keyFile)).entries).toEqual([]);
    expect(board.audited.splice(0).map((e) => [e.action, e.subject ?? null])).toEqual([
      ['key_revoked', 'tank-1'],
      ['key_revoked', 'gps-2'],
      ['settings_applied', 'gw-pier9'],
    ]);

    // A slot whose release cannot check the settings (a broken update) blames itself, not the card's
    // harbor.conf: nothing on the boot partition, the reason on the screen.
    rmSync(join(board.root, SLOT_MARKER));
    board.breakGateway();
    expect(board.boot1().status).toBe('invalid');
    expect(existsSync(join(board.boot, ERROR_FILE))).toBe(false);
    expect(board.read(ISSUE)).toContain("this release could not apply the site's settings: the gateway could not check");
    expect(board.audited.map((e) => [e.action, e.outcome])).toEqual([['settings_applied', 'failed']]);
  });

  it('applies the forwarding settings: into gateway.env, secrets into the credential store, kept when left empty', () => {
    const board = makeBoard();
    const token = 'remote-token-0123456789abcdef';
    writeFileSync(
      join(board.boot, CONFIG_FILE),
      [
        'REMOTE_QUESTDB_URL=https://questdb.example.com:9000',
        `REMOTE_QUESTDB_TOKEN=${token}`,
        'REMOTE_QUESTDB_TABLE=sites',
        'REMOTE_QUESTDB_POLICY=block',
        // A metered link's settings.
        'REMOTE_QUESTDB_FLUSH_INTERVAL_MS=10000',
        'REMOTE_QUESTDB_MAX_BYTES_PER_S=4000',
        'REMOTE_QUESTDB_CHEAP_HOURS=22:00-06:00',
        'LOCAL_QUESTDB=on',
      ].join('\r\n'),
    );
    expect(board.boot1()).toEqual({
      status: 'applied',
      problems: [],
      generated: ['API_KEY', 'QUESTDB_PASSWORD', 'GRAFANA_ADMIN_PASSWORD', 'CONSOLE_PASSWORD'],
    });
    expect(parseEnvText(board.read(GATEWAY_ENV))).toMatchObject({
      REMOTE_QUESTDB_URL: 'https://questdb.example.com:9000',
      REMOTE_QUESTDB_TABLE: 'sites',
      REMOTE_QUESTDB_POLICY: 'block',
      REMOTE_QUESTDB_FLUSH_INTERVAL_MS: '10000',
      REMOTE_QUESTDB_MAX_BYTES_PER_S: '4000',
      REMOTE_QUESTDB_CHEAP_HOURS: '22:00-06:00',
      LOCAL_QUESTDB: 'on',
    });
    expect(board.read(GATEWAY_ENV)).not.toContain(token);
    expect(board.read(credstoreFile('remote_questdb_token'))).toBe(token);
    expect(statSync(join(board.root, credstoreFile('remote_questdb_token'))).mode & 0o777).toBe(0o600);
    expect(statSync(join(board.root, 'etc/credstore')).mode & 0o777).toBe(0o700);
    expect(existsSync(join(board.root, credstoreFile('upstream_api_key')))).toBe(false);
    expect(board.logs.join('\n')).not.toContain(token);

    // The editable copy holds the settings, not the token; applied again, it keeps the token.
    const applied = readFileSync(join(board.boot, APPLIED_FILE), 'utf8');
    expect(applied).toContain('REMOTE_QUESTDB_URL=https://questdb.example.com:9000');
    expect(applied).toContain('REMOTE_QUESTDB_TOKEN=\r\n');
    expect(applied).not.toContain(token);
    writeFileSync(join(board.boot, CONFIG_FILE), applied);
    expect(board.boot1().status).toBe('applied');
    expect(board.read(credstoreFile('remote_questdb_token'))).toBe(token);
    expect(parseEnvText(board.read(GATEWAY_ENV))).toMatchObject({ REMOTE_QUESTDB_URL: 'https://questdb.example.com:9000' });

    // Without its address the sink is off: the line goes, the token stays for a later harbor.conf.
    writeFileSync(join(board.boot, CONFIG_FILE), 'HARBOR_ID=\n');
    expect(board.boot1().status).toBe('applied');
    expect(parseEnvText(board.read(GATEWAY_ENV))).not.toHaveProperty('REMOTE_QUESTDB_URL');
    expect(board.read(credstoreFile('remote_questdb_token'))).toBe(token);
  });

  it('refuses a remote QuestDB the gateway refuses in production, in its words, without echoing the token', () => {
    const board = makeBoard();
    writeFileSync(join(board.boot, CONFIG_FILE), 'REMOTE_QUESTDB_URL=http://questdb.example.com:9000\nREMOTE_QUESTDB_TOKEN=short\n');
    const result = board.boot1();
    expect(result.status).toBe('invalid');
    expect(result.problems).toEqual([
      expect.stringMatching(/^REMOTE_QUESTDB_URL must be https:\/\/ in production/),
      expect.stringMatching(/^the remote QuestDB token must be at least 16 characters in production/),
    ]);
    expect(readFileSync(join(board.boot, ERROR_FILE), 'utf8')).not.toContain('short\r');
    expect(existsSync(join(board.root, 'etc/credstore'))).toBe(false);
  });

  it('has Grafana store a new admin password given later', () => {
    const board = makeBoard();
    board.boot1();
    expect(existsSync(join(board.root, GRAFANA_PASSWORD_FLAG))).toBe(false);
    writeFileSync(join(board.boot, CONFIG_FILE), 'GRAFANA_ADMIN_PASSWORD=a-new-grafana-password-42');
    board.boot1();
    expect(board.read(credentialFile('grafana_admin_password'))).toBe('a-new-grafana-password-42');
    expect(board.read(GRAFANA_PASSWORD_FLAG)).toBe('');
    expect(board.logs.join('\n')).not.toContain('a-new-grafana-password-42');
  });

  it('leaves an invalid harbor.conf in place and says why, without touching the system', () => {
    const board = makeBoard();
    writeFileSync(join(board.boot, CONFIG_FILE), 'API_KEY=too-short\nTIMEZONE=Nowhere\n');
    const result = board.boot1();
    expect(result.status).toBe('invalid');
    expect(existsSync(join(board.boot, CONFIG_FILE))).toBe(true);
    expect(board.read(GATEWAY_ENV)).toBe(repoFile('systemd/gateway.env'));
    expect(existsSync(join(board.root, CREDENTIALS_DIR))).toBe(false);
    expect(board.leftInRun()).toEqual([]);
    const error = readFileSync(join(board.boot, ERROR_FILE), 'utf8');
    // The first from harbor.conf's own rules, the second from the gateway's check of its settings.
    expect(error).toContain('- TIMEZONE "Nowhere" is not a known time zone');
    expect(error).toContain('- API_KEY must be at least 16 characters in production');
    expect(error).not.toContain('too-short');
    expect(board.read(ISSUE)).toContain(ERROR_FILE);
    expect(board.audited.map((e) => [e.action, e.outcome, e.detail])).toEqual([
      ['settings_applied', 'refused', `2 problem(s), listed in ${ERROR_FILE} on the boot partition`],
    ]);

    writeFileSync(join(board.boot, CONFIG_FILE), 'API_KEY=now-long-enough-0123456789\n');
    expect(board.boot1().status).toBe('applied');
    expect(existsSync(join(board.boot, ERROR_FILE))).toBe(false);
  });

  it('refuses what the gateway refuses in production, in the gateway’s words', () => {
    const board = makeBoard();
    writeFileSync(
      join(board.boot, CONFIG_FILE),
      'API_KEY=harbor-dev-key\nQUESTDB_PASSWORD=Quest\nGRAFANA_ADMIN_PASSWORD=change-me\nHARBOR_ID=pier/4\n',
    );
    const result = board.boot1();
    expect(result.status).toBe('invalid');
    expect(result.problems).toEqual([
      expect.stringMatching(/^HARBOR_ID must be 1-128 characters of A-Z a-z 0-9 _ \. ~ -/),
      expect.stringMatching(/^API_KEY is a shipped test default/),
      expect.stringMatching(/^QUESTDB_PASSWORD is a shipped test default/),
      expect.stringMatching(/^GRAFANA_ADMIN_PASSWORD is a shipped test default/),
    ]);
    const error = readFileSync(join(board.boot, ERROR_FILE), 'utf8');
    for (const secret of ['harbor-dev-key', 'Quest', 'change-me']) expect(error).not.toContain(secret);
    expect(existsSync(join(board.root, CREDENTIALS_DIR))).toBe(false);
  });

  it('refuses a card too small for the queue', () => {
    const board = makeBoard(40 * MiB);
    expect(board.boot1().problems).toEqual(['only 40MiB free on the card; the queue needs at least 64MiB free']);
  });

  it('makes the root read-only when asked, remounting it writable to apply later changes', () => {
    const board = makeBoard();
    writeFileSync(join(board.boot, CONFIG_FILE), 'READ_ONLY_ROOT=yes\n');
    board.boot1();
    expect(board.read('etc/fstab')).toBe('PARTUUID=1a2b3c4d-02\t/\text4\tro,noatime\t0\t1\n');
    expect(board.calls.at(-1)).toBe('remount ro');

    board.setReadOnly(true);
    writeFileSync(join(board.boot, CONFIG_FILE), 'READ_ONLY_ROOT=no\n');
    board.boot1();
    expect(board.calls.slice(-3)).toEqual(['remount rw', 'hostname harbor-3f9a0c', 'createCertificate']);
    expect(board.read('etc/fstab')).toBe('PARTUUID=1a2b3c4d-02\t/\text4\trw,noatime\t0\t1\n');
  });

  describe('with the gateway', () => {
    let gateway: GatewayProcess | undefined;
    afterEach(async () => {
      gateway?.child.kill('SIGTERM');
      await gateway?.exited;
      gateway = undefined;
    });

    it('writes settings and credentials the gateway accepts in production', async () => {
      const board = makeBoard();
      writeFileSync(join(board.boot, CONFIG_FILE), 'SITE_NAME=Pier 7\nHARBOR_ID=pier7\n');
      board.boot1();
      // What systemd makes of harbor-gateway.service: the credentials of its LoadCredential= lines,
      // its Environment= overlaid by its EnvironmentFile.
      const unit = board.read(GATEWAY_UNIT);
      const credentials = join(board.root, 'run/credentials/harbor-gateway.service');
      mkdirSync(credentials, { recursive: true });
      // The forwarding secrets, by name from the credential store, exist only once given: systemd skips them.
      for (const { name, path } of unitCredentials(unit)) {
        if (existsSync(join(board.root, path))) copyFileSync(join(board.root, path), join(credentials, name));
      }
      const env = { ...unitEnvironment(unit), ...parseEnvText(board.read(GATEWAY_ENV)) };
      expect(env).toMatchObject({
        GATEWAY_ENV: 'production',
        GATEWAY_NAME: 'Pier 7',
        HARBOR_ID: 'pier7',
        QUEUE_MAX_BYTES: String(7 * GiB),
      });
      gateway = await spawnGateway({
        ...env,
        DATA_DIR: join(board.root, 'var/lib/harbor-gateway'),
        CREDENTIALS_DIRECTORY: credentials,
        QUESTDB_URL: inject('questdbUrl'),
        QUESTDB_TABLE: `appliance_firstboot_${process.pid}`,
        HEALTH_REPORT: 'false',
        // The unit's 443, on a free port here.
        HTTPS_PORT: '0',
      });
      const apiKey = board.read(credentialFile('api_key'));
      const sent = await fetch(`${gateway.url}/api/v2/ingest/ingest/pier7`, {
        method: 'POST',
        headers: { 'X-API-Key': apiKey },
        body: JSON.stringify({ ship_id: 'ship-7', cargo_id: 'temperature', value: 4.5 }),
      });
      expect(sent.status).toBe(200);
      const status = (await (await fetch(`${gateway.url}/status`, { headers: { 'X-API-Key': apiKey } })).json()) as {
        totals: { acceptedReadings: number };
        queue: { maxBytes: number };
      };
      expect(status.totals.acceptedReadings).toBe(1);
      expect(status.queue.maxBytes).toBe(7 * GiB);
      const started = gateway.logs.find((line) => line['event'] === 'started');
      expect(started?.['apiKeySource']).toBe('systemd credential');
      // The console takes the password first boot generated, from the credential store.
      const console = new ConsoleClient(gateway.url);
      expect((await console.login(`${board.read(credstoreFile('console_password'))}-wrong`)).status).toBe(401);
      expect((await console.login(board.read(credstoreFile('console_password')))).location).toBe('/console/');
      expect(lstatSync(join(board.root, 'var/lib/harbor-gateway/queue.db')).isFile()).toBe(true);
      // It serves the certificate whose fingerprint first boot put on the console.
      expect(env['HTTPS_PORT']).toBe('443');
      const shown = /HTTPS certificate SHA-256: (\S+)/.exec(renderBanner(bannerFacts({ root: board.root, cmdline: '' })))?.[1];
      expect(started?.['tls']).toMatchObject({ fingerprintSha256: shown });
    });
  });
});
