// The appliance's tools in the gateway's audit trail: the lines they hand the gateway's `audit
// record` pass its schema, the command and settings come from the gateway's unit, a trail that
// cannot be written never stops a tool, and nothing secret is named (keys, an address's token).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { auditLines, gatewayRun, recordAudit } from '../../appliance/board/audit.mjs';
import { deviceKeyChanges, hashDeviceKey } from '../../appliance/board/firstboot.mjs';
import { renderKeyFile } from '../../appliance/board/settings.mjs';
import { sourceName } from '../../appliance/board/records.mjs';
import { installSystemdFiles } from '../../appliance/lib/layout.mjs';
import { auditInputSchema } from '../../src/audit/audit-entry.js';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe('the appliance in the audit trail', () => {
  it("hands the gateway's audit record lines its schema takes, one line each, bounded", () => {
    const lines = auditLines([
      { action: 'settings_applied', outcome: 'ok', actor: 'harbor.conf', subject: 'gw-pier9', detail: 'queue bound 1 bytes\nnetwork dhcp' },
      { action: 'update_installed', outcome: 'refused', actor: 'harbor-update', subject: 'harbor-update.raucb', detail: 'x'.repeat(2000) },
      { action: 'update_confirmed', outcome: 'ok', actor: 'harbor-update', subject: '', detail: '' },
    ])
      .trimEnd()
      .split('\n');
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(auditInputSchema.safeParse(JSON.parse(line)).success, line.slice(0, 80)).toBe(true);
    expect(JSON.parse(lines[0]!).detail).toBe('queue bound 1 bytes network dhcp');
    expect(JSON.parse(lines[1]!).detail).toHaveLength(500);
    expect(JSON.parse(lines[2]!)).toEqual({ action: 'update_confirmed', outcome: 'ok', actor: 'harbor-update' });
  });

  it("runs the gateway's own command with its unit's environment, and only logs a trail it cannot write", () => {
    const root = mkdtempSync(join(tmpdir(), 'harbor-appliance-audit-'));
    roots.push(root);
    installSystemdFiles(root, { withGrafana: false });
    const { program, env } = gatewayRun(root);
    expect(program).toEqual(['/usr/bin/node', '/opt/harbor-gateway/dist/gateway.mjs']);
    expect(env['DATA_DIR']).toBe('/var/lib/harbor-gateway');

    const runs: { command: string; args: readonly string[]; input: unknown }[] = [];
    const logs: string[] = [];
    const entry = { action: 'update_confirmed', outcome: 'ok', actor: 'harbor-update', subject: '0.6.0' } as const;
    const ok = recordAudit([entry], {
      command: [...program, 'audit', 'record'],
      env,
      log: (message) => logs.push(message),
      run: ((command: string, args: readonly string[], options: { input: unknown }) => {
        runs.push({ command, args, input: options.input });
        return { status: 0, stdout: '', stderr: '' };
      }) as never,
    });
    expect(ok).toBe(true);
    expect(runs).toEqual([
      { command: '/usr/bin/node', args: ['/opt/harbor-gateway/dist/gateway.mjs', 'audit', 'record'], input: auditLines([entry]) },
    ]);
    const failed = recordAudit([entry], {
      command: [...program, 'audit', 'record'],
      env,
      log: (message) => logs.push(message),
      run: (() => ({ status: 73, stdout: '', stderr: 'not in the audit trail: the data directory does not exist' })) as never,
    });
    expect(failed).toBe(false);
    expect(logs).toEqual(['not in the audit trail (update_confirmed ok): not in the audit trail: the data directory does not exist']);
  });

  it('names where a bundle came from without the user, password or query of its address', () => {
    expect(sourceName('https://central:s3cret@tier.example:8443/pier9/harbor.raucb?token=abc')).toBe(
      'https://tier.example:8443/pier9/harbor.raucb',
    );
    expect(sourceName('/boot/firmware/harbor-update.raucb.installing')).toBe('harbor-update.raucb.installing');
    expect(sourceName('the console upload')).toBe('the console upload');
  });

  it('tells the keys DEVICE_KEYS adds and revokes, and is silent about those it keeps', () => {
    const current = renderKeyFile(
      [
        { name: 'tank-1', key: 'tank1-key-0123456789', shipPrefix: undefined },
        { name: 'gps-2', key: 'gps2-key-0123456789', shipPrefix: 'gps-' },
        { name: 'old-3', key: 'old3-key-0123456789', shipPrefix: undefined },
        { name: 'crane', key: 'crane-key-0123456789', shipPrefix: 'crane-' },
      ],
      hashDeviceKey,
    );
    const changes = deviceKeyChanges(current, [
      { name: 'tank-1', key: 'tank1-key-0123456789', shipPrefix: undefined },
      { name: 'gps-2', key: 'gps2-new-key-0123456789', shipPrefix: 'gps-' },
      { name: 'crane', key: 'crane-key-0123456789', shipPrefix: 'crane-north-' },
      { name: 'buoy-4', key: 'buoy4-key-0123456789', shipPrefix: undefined },
    ]);
    expect(changes.map((c) => [c.action, c.subject, c.detail])).toEqual([
      ['key_revoked', 'gps-2', 'replaced by DEVICE_KEYS'],
      ['key_added', 'gps-2', 'ships starting with gps-'],
      ['key_revoked', 'crane', 'replaced by DEVICE_KEYS'],
      ['key_added', 'crane', 'ships starting with crane-north-'],
      ['key_added', 'buoy-4', 'all ships'],
      ['key_revoked', 'old-3', 'not in DEVICE_KEYS'],
    ]);
    expect(JSON.stringify(changes)).not.toMatch(/key-0123456789|hmac-sha256/);
  });
});
