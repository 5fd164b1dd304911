// The appliance's tools in the gateway's audit trail: settings applied from harbor.conf, device
// keys it added or revoked, updates installed, confirmed or rolled back. They are written by the
// gateway's own command (`harbor-gateway audit record`, entries as JSON lines on stdin) with the
// unit's program and environment, so the trail has one writer's format and lands in the gateway's
// DATA_DIR, where the running gateway reads, logs and counts them. Never a secret in an entry.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnvText } from './settings.mjs';
import { unitCommand, unitEnvironment } from './unit.mjs';

/** The gateway's unit as installed, and the settings file its EnvironmentFile= names. */
const GATEWAY_UNIT = 'etc/systemd/system/harbor-gateway.service';
const GATEWAY_ENV = 'etc/harbor-gateway/gateway.env';

/**
 * @typedef {object} AuditEntry  one line of `harbor-gateway audit record` (src/audit/audit-entry.ts checks it)
 * @property {string} action
 * @property {'ok' | 'refused' | 'throttled' | 'failed'} outcome
 * @property {string} actor
 * @property {string} [subject]
 * @property {string} [detail]
 */

/**
 * The gateway's command and environment as its unit runs it, read from a root tree (`/` on the board).
 * @param {string} root
 * @returns {{ program: string[], env: Record<string, string> }}
 */
export function gatewayRun(root) {
  const unit = readFileSync(join(root, GATEWAY_UNIT), 'utf8');
  const command = unitCommand(unit);
  const envPath = join(root, GATEWAY_ENV);
  return {
    program: command.at(-1) === 'serve' ? command.slice(0, -1) : command,
    env: { ...unitEnvironment(unit), ...(existsSync(envPath) ? parseEnvText(readFileSync(envPath, 'utf8')) : {}) },
  };
}

/** Text of an entry's field: one line, bounded as the gateway bounds it. */
const line = (/** @type {string} */ text, /** @type {number} */ max) =>
  text
    .replace(/\p{Cc}/gu, ' ')
    .trim()
    .slice(0, max);

/**
 * The lines `audit record` reads: one JSON object per entry, empty fields left out.
 * @param {AuditEntry[]} entries
 */
export function auditLines(entries) {
  return entries
    .map(({ action, outcome, actor, subject, detail }) =>
      JSON.stringify({
        action,
        outcome,
        actor,
        ...(subject ? { subject: line(subject, 200) } : {}),
        ...(detail ? { detail: line(detail, 500) } : {}),
      }),
    )
    .map((text) => `${text}\n`)
    .join('');
}

/**
 * Adds entries to the trail through the gateway's command (`command`: its program and bundle with
 * `audit record`); a trail that cannot be written is logged and never stops the tool.
 * @param {AuditEntry[]} entries
 * @param {{ command: string[], env: Record<string, string>, log: (message: string) => void, run?: typeof spawnSync }} gateway
 * @returns {boolean} whether the entries were written
 */
export function recordAudit(entries, { command, env, log, run = spawnSync }) {
  if (entries.length === 0) return true;
  const [node, ...args] = command;
  const result = run(String(node), args, {
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', ...env },
    input: auditLines(entries),
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (result.status === 0) return true;
  const why = `${result.stderr ?? ''}`.trim() || result.error?.message || `exit status ${result.status ?? result.signal}`;
  log(`not in the audit trail (${entries.map((e) => `${e.action} ${e.outcome}`).join(', ')}): ${why}`);
  return false;
}
