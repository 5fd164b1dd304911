import { existsSync } from 'node:fs';
import { type AuditInput, auditInputSchema } from '../audit/audit-entry.js';
import { AuditFile, auditPath } from '../audit/audit-file.js';
import { SETTINGS } from '../config/settings.js';
import { recordAudit } from './cli-audit.js';

export const AUDIT_USAGE = `harbor-gateway audit <command> [options]

  list [--limit N] [--json]     the newest entries of the audit trail, newest first (default 50)
  record                        adds entries read from stdin, one JSON object a line:
                                {"action":…,"outcome":…,"actor":…,"origin":…,"subject":…,"detail":…}
                                (the appliance's tools record harbor.conf and updates this way)

  --data-dir DIR                the data directory (default: $DATA_DIR or ${SETTINGS.dataDir.default})
`;

interface Output {
  out: (text: string) => void;
  err: (text: string) => void;
}

/** Lines `record` takes at most from one run: the appliance's tools record a handful. */
const MAX_RECORDED = 1000;

/** Runs the audit command; `input` is stdin's text (read only by `record`). Returns the exit status. */
export async function auditCommand(args: string[], env: NodeJS.ProcessEnv, io: Output, input: () => Promise<string>): Promise<number> {
  const [command, ...rest] = args;
  let dataDir = env[SETTINGS.dataDir.env] || SETTINGS.dataDir.default!;
  let limit = 50;
  let json = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!;
    if (arg === '--data-dir') dataDir = rest[++i] ?? '';
    else if (arg === '--limit') limit = Number(rest[++i]);
    else if (arg === '--json') json = true;
    else {
      io.err(`unknown argument: ${arg}\n\n${AUDIT_USAGE}`);
      return 64;
    }
  }
  if (command === 'help' || command === undefined) {
    io.out(AUDIT_USAGE);
    return command === 'help' ? 0 : 64;
  }
  if (command === 'list') {
    if (!Number.isInteger(limit) || limit < 1) {
      io.err('--limit must be a positive whole number\n');
      return 64;
    }
    if (!existsSync(auditPath(dataDir))) {
      io.out(json ? '[]\n' : `no audit trail in ${dataDir} yet\n`);
      return 0;
    }
    const file = AuditFile.open(dataDir);
    try {
      const entries = file.latest(limit);
      if (json) {
        io.out(
          `${JSON.stringify(entries.map(({ atMs, firstMs, ...e }) => ({ ...e, at: new Date(atMs).toISOString(), firstAt: new Date(firstMs).toISOString() })))}\n`,
        );
      } else {
        for (const e of entries) {
          const who = e.origin === null ? e.actor : `${e.actor} ${e.origin}`;
          const times = e.count > 1 ? ` ×${e.count} since ${new Date(e.firstMs).toISOString()}` : '';
          io.out(
            `${new Date(e.atMs).toISOString()}  ${e.action} ${e.outcome}  ${who}${e.subject === null ? '' : `  ${e.subject}`}${e.detail === null ? '' : `: ${e.detail}`}${times}\n`,
          );
        }
      }
    } finally {
      file.close();
    }
    return 0;
  }
  if (command !== 'record') {
    io.err(`unknown audit command: ${command}\n\n${AUDIT_USAGE}`);
    return 64;
  }
  const lines = (await input()).split('\n').filter((line) => line.trim() !== '');
  if (lines.length === 0 || lines.length > MAX_RECORDED) {
    io.err(`record takes 1 to ${MAX_RECORDED} entries on stdin, one JSON object a line\n`);
    return 64;
  }
  const entries: AuditInput[] = [];
  for (const [index, line] of lines.entries()) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      io.err(`line ${index + 1}: not JSON\n`);
      return 65;
    }
    const checked = auditInputSchema.safeParse(parsed);
    if (!checked.success) {
      const issue = checked.error.issues[0]!;
      io.err(`line ${index + 1}: ${issue.path.join('.') || 'entry'}: ${issue.message}\n`);
      return 65;
    }
    entries.push(checked.data);
  }
  return recordAudit(dataDir, entries, io.err) ? 0 : 73;
}
