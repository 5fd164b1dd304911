// grafana/provisioning/start-grafana.sh: the provisioning tree Grafana reads, with a contact point
// for the alerts only when the settings name one, SHIPS_SEEN_DAYS written into the dashboards and
// rules, and the refusal of values that would break it.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { tempDir } from './support/temp-dir.js';

const shipped = join(import.meta.dirname, '..', 'grafana', 'provisioning');
const script = join(shipped, 'start-grafana.sh');

function start(env: Record<string, string>) {
  const target = join(tempDir('grafana-provisioning'), 'provisioning');
  // The command Grafana would be: here it prints what it was started with.
  const result = spawnSync('/bin/sh', [script, '/bin/echo', 'grafana', 'server'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HARBOR_PROVISIONING: shipped, GF_PATHS_PROVISIONING: target, ...env },
    encoding: 'utf8',
  });
  return { ...result, target, contactPoints: join(target, 'alerting', 'contact-points.yaml') };
}

describe('start-grafana.sh', () => {
  it('provides the shipped data source, dashboards and alert rules as shipped, and no contact point by default', () => {
    const run = start({});
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout).toBe('grafana server\n');
    expect(readlinkSync(join(run.target, 'datasources'))).toBe(join(shipped, 'datasources'));
    expect(readlinkSync(join(run.target, 'dashboards', 'harbor.yaml'))).toBe(join(shipped, 'dashboards', 'harbor.yaml'));
    for (const file of ['dashboards/harbor/comprehensive-telemetry.json', 'dashboards/harbor/gateway.json', 'alerting/harbor-rules.yaml']) {
      expect(readFileSync(join(run.target, file), 'utf8'), file).toBe(readFileSync(join(shipped, file), 'utf8'));
    }
    expect(existsSync(run.contactPoints)).toBe(false);
  });

  it('writes SHIPS_SEEN_DAYS into every window of ships seen, of the dashboards and the rules', () => {
    const run = start({ SHIPS_SEEN_DAYS: '90' });
    expect(run.status).toBe(0);
    const marked = (text: string) => [...text.matchAll(/-(\d+) \/\* SHIPS_SEEN_DAYS \*\//g)].map((m) => m[1]);
    const site = readFileSync(join(run.target, 'dashboards', 'harbor', 'comprehensive-telemetry.json'), 'utf8');
    const rules = readFileSync(join(run.target, 'alerting', 'harbor-rules.yaml'), 'utf8');
    // The site, ship and cargo lists (query and definition each), ships reporting, ships at a glance
    // (its ships and their last readings); the silent-ship, silent-series and cargo rules.
    expect(marked(site)).toEqual(Array(9).fill('90'));
    expect(marked(rules)).toEqual(['90', '90', '90']);
    expect(marked(readFileSync(join(shipped, 'alerting', 'harbor-rules.yaml'), 'utf8'))).toEqual(['30', '30', '30']);
    // Only the marked windows change.
    expect(site.replaceAll('-90 /* SHIPS_SEEN_DAYS */', '-30 /* SHIPS_SEEN_DAYS */')).toBe(
      readFileSync(join(shipped, 'dashboards', 'harbor', 'comprehensive-telemetry.json'), 'utf8'),
    );
  });

  it('writes an e-mail and a webhook contact point and routes every alert to them', () => {
    const run = start({
      ALERT_EMAIL: "ops@example.com;o'neil@example.com",
      ALERT_WEBHOOK_URL: 'https://hooks.example.com/harbor?token=a$b',
    });
    expect(run.status).toBe(0);
    const file = parse(readFileSync(run.contactPoints, 'utf8'));
    expect(file.contactPoints).toEqual([
      {
        orgId: 1,
        name: 'Harbor alerts',
        receivers: [
          { uid: 'harbor-alerts-email', type: 'email', settings: { addresses: "ops@example.com;o'neil@example.com", singleEmail: true } },
          // Grafana reads $$ in a provisioning file as one $.
          {
            uid: 'harbor-alerts-webhook',
            type: 'webhook',
            settings: { url: 'https://hooks.example.com/harbor?token=a$$b', httpMethod: 'POST' },
          },
        ],
      },
    ]);
    expect(file.policies).toEqual([expect.objectContaining({ orgId: 1, receiver: 'Harbor alerts' })]);
  });

  it('drops the contact point at the next start once the setting is removed', () => {
    const first = start({ ALERT_WEBHOOK_URL: 'http://alerts.site.lan/hook' });
    expect(parse(readFileSync(first.contactPoints, 'utf8')).contactPoints[0].receivers.map((r: { type: string }) => r.type)).toEqual([
      'webhook',
    ]);
    const again = spawnSync('/bin/sh', [script, 'true'], {
      env: { PATH: process.env.PATH ?? '/bin', HARBOR_PROVISIONING: shipped, GF_PATHS_PROVISIONING: first.target },
    });
    expect(again.status).toBe(0);
    expect(existsSync(first.contactPoints)).toBe(false);
  });

  it('refuses a webhook that is not http(s), an address without @, and values over several lines, saying which', () => {
    for (const [env, message] of [
      [{ ALERT_WEBHOOK_URL: 'ftp://files.example.com' }, 'ALERT_WEBHOOK_URL must start with http:// or https://'],
      [{ ALERT_EMAIL: 'ops' }, 'ALERT_EMAIL must be e-mail addresses'],
      [{ ALERT_EMAIL: 'ops@example.com\nx: 1' }, 'ALERT_EMAIL must be one line without control characters'],
      [{ ALERT_WEBHOOK_URL: 'https://a.example\r' }, 'ALERT_WEBHOOK_URL must be one line'],
      [{ SHIPS_SEEN_DAYS: '30d' }, 'SHIPS_SEEN_DAYS must be a whole number of days from 1 to 3650'],
      [{ SHIPS_SEEN_DAYS: '0' }, 'SHIPS_SEEN_DAYS must be a whole number'],
      [{ SHIPS_SEEN_DAYS: '3651' }, 'SHIPS_SEEN_DAYS must be a whole number'],
    ] as const) {
      const run = start(env);
      expect(run.status, message).toBe(1);
      expect(run.stderr).toContain(message);
      expect(run.stdout).toBe('');
    }
  });

  it('starts Grafana through it in the compose stack, from the read-only mount, with no contact point unless set', () => {
    const grafana = parse(readFileSync(join(import.meta.dirname, '..', 'compose.yaml'), 'utf8')).services.grafana;
    expect(grafana.entrypoint).toEqual(['/bin/sh', '/etc/grafana/provisioning/start-grafana.sh', '/run.sh']);
    expect(grafana.volumes).toContain('./grafana/provisioning:/etc/grafana/provisioning:ro');
    expect(grafana.environment).toMatchObject({
      HARBOR_PROVISIONING: '/etc/grafana/provisioning',
      GF_PATHS_PROVISIONING: '/var/lib/grafana/provisioning',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Compose's own ${NAME:-} syntax, not a template literal
      ALERT_EMAIL: '${ALERT_EMAIL:-}',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Compose's own ${NAME:-} syntax, not a template literal
      ALERT_WEBHOOK_URL: '${ALERT_WEBHOOK_URL:-}',
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Compose's own ${NAME:-} syntax, not a template literal
      SHIPS_SEEN_DAYS: '${SHIPS_SEEN_DAYS:-30}',
      // The home dashboard as start-grafana.sh wrote it, SHIPS_SEEN_DAYS in.
      GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH: '/var/lib/grafana/provisioning/dashboards/harbor/comprehensive-telemetry.json',
    });
  });
});
