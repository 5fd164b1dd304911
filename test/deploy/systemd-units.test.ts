// The appliance's systemd units: `systemd-analyze verify` on each (through the repo's script, which
// installs systemd from Debian when it is missing and stands in for programs the machine lacks),
// and the settings the gateway relies on.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/temp-dir.js';

const root = join(import.meta.dirname, '..', '..');
const unitsDir = join(root, 'systemd');
const units = readdirSync(unitsDir)
  .filter((f) => f.endsWith('.service'))
  .sort();
const verifyScript = join(root, 'scripts', 'verify-systemd-units.sh');

const verify = (files: string[]) => spawnSync('bash', [verifyScript, ...files], { encoding: 'utf8', timeout: 5 * 60_000 });

/** The values of each key of a unit file, in order (keys repeat: Environment=, LoadCredential=). */
function readUnit(name: string): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  for (const line of readFileSync(join(unitsDir, name), 'utf8').split('\n')) {
    const match = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (match) keys.set(match[1]!, [...(keys.get(match[1]!) ?? []), match[2]!]);
  }
  return keys;
}

/** The settings named in the configuration reference. */
const gatewaySettings = (): Set<string> => {
  const reference = readFileSync(join(root, 'docs', 'configuration.md'), 'utf8');
  return new Set([...reference.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]!));
};

describe('systemd units', () => {
  it('ships the gateway, QuestDB and Grafana units', () => {
    expect(units).toEqual(['harbor-gateway.service', 'harbor-grafana.service', 'harbor-questdb.service']);
  });

  it('passes systemd-analyze verify without a warning', () => {
    const result = verify(units.map((u) => join(unitsDir, u)));
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('fails verification on a directive systemd would ignore, even where a program is missing', () => {
    const dir = tempDir('units');
    const broken = readFileSync(join(unitsDir, 'harbor-gateway.service'), 'utf8')
      .replace('Restart=on-failure', 'Restart=sometimes')
      .replace('ExecStart=/usr/bin/node', 'ExecStart=/opt/harbor-missing/bin/node');
    writeFileSync(join(dir, 'harbor-gateway.service'), broken);
    const result = verify([join(dir, 'harbor-gateway.service')]);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('sometimes');
    expect(result.stderr).not.toContain('/opt/harbor-missing/bin/node');
  });

  it('runs the gateway hardened, with its queue in a state directory, secrets as credentials and a watchdog', () => {
    const gateway = readUnit('harbor-gateway.service');
    const one = (key: string) => gateway.get(key)?.join(' ');
    expect(one('Type')).toBe('notify');
    expect(one('NotifyAccess')).toBe('all');
    expect(one('WatchdogSec')).toMatch(/^\d+s$/);
    expect(one('Restart')).toBe('on-failure');
    expect(one('RestartPreventExitStatus')).toBe('78 75');
    expect(one('DynamicUser')).toBe('yes');
    expect(one('StateDirectory')).toBe('harbor-gateway');
    expect(gateway.get('Environment')).toContain('DATA_DIR=%S/harbor-gateway');
    expect(gateway.get('Environment')).toContain('GATEWAY_ENV=production');
    expect(one('EnvironmentFile')).toBe('-/etc/harbor-gateway/gateway.env');
    expect(gateway.get('LoadCredential')?.map((c) => c.split(':')[0])).toEqual([
      'api_key',
      'questdb_password',
      'grafana_admin_password',
      'console_password',
      'upstream_api_key',
      'kafka_sasl_password',
      'remote_questdb_token',
      'metrics_token',
    ]);
    // The forwarding secrets by name only: systemd searches its credential stores and skips a missing one.
    expect(
      gateway
        .get('LoadCredential')
        ?.slice(3)
        .every((c) => !c.includes(':')),
    ).toBe(true);
    for (const [key, value] of Object.entries({ NoNewPrivileges: 'yes', ProtectSystem: 'strict', ProtectHome: 'yes', PrivateTmp: 'yes' })) {
      expect(one(key), key).toBe(value);
    }
    // AF_NETLINK: the console and the certificate list the board's own addresses.
    expect(one('RestrictAddressFamilies')).toBe('AF_UNIX AF_INET AF_INET6 AF_NETLINK');
    // HTTPS on 443: binding a low port is the only capability the service has.
    expect(gateway.get('Environment')).toContain('HTTPS_PORT=443');
    expect(one('AmbientCapabilities')).toBe('CAP_NET_BIND_SERVICE');
    expect(one('CapabilityBoundingSet')).toBe('CAP_NET_BIND_SERVICE');
    expect(Number.parseInt(one('MemoryMax') ?? '', 10)).toBeLessThanOrEqual(512);
    // The gateway buffers while QuestDB is away: QuestDB is wanted, never required.
    expect(one('Wants')).toContain('harbor-questdb.service');
    expect(one('After')).toContain('harbor-questdb.service');
    expect(gateway.has('Requires') || gateway.has('BindsTo')).toBe(false);
  });

  it('documents in the example environment file only settings the gateway has', () => {
    const known = gatewaySettings();
    const named = [...readFileSync(join(unitsDir, 'gateway.env'), 'utf8').matchAll(/^#?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(5);
    for (const name of named) expect(known.has(name), name).toBe(true);
  });

  it("gives QuestDB its data directory and file and memory-map limits, and Grafana the repo's provisioning", () => {
    const questdb = readUnit('harbor-questdb.service');
    expect(questdb.get('StateDirectory')).toEqual(['harbor-questdb']);
    expect(questdb.get('ExecStart')![0]).toContain('-d %S/harbor-questdb');
    expect(Number(questdb.get('LimitNOFILE')![0])).toBeGreaterThanOrEqual(65536);
    expect(readFileSync(join(unitsDir, '60-harbor-questdb.conf'), 'utf8')).toMatch(/^vm\.max_map_count = \d{7}$/m);
    const grafana = readUnit('harbor-grafana.service');
    expect(grafana.get('Environment')).toContain('HARBOR_PROVISIONING=/opt/harbor-gateway/grafana/provisioning');
    expect(grafana.get('Environment')).toContain('GF_PATHS_PROVISIONING=%S/harbor-grafana/provisioning');
    expect(grafana.get('ExecStart')![0]).toContain(
      '/opt/harbor-gateway/grafana/provisioning/start-grafana.sh /usr/share/grafana/bin/grafana server',
    );
    expect(grafana.get('Environment')).toContain('QUESTDB_PG_ADDRESS=127.0.0.1:8812');
    expect(grafana.get('Environment')).toContain('GF_AUTH_ANONYMOUS_ENABLED=false');
    expect(grafana.get('Environment')).toContain('GF_USERS_ALLOW_SIGN_UP=false');
  });
});
