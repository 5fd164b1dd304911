import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { randomBytes } from 'node:crypto';
import { type AuditInput, entryOf } from '../audit/audit-entry.js';
import { AuditFile } from '../audit/audit-file.js';

/** The user a command runs for: the one behind `sudo`, else its own. */
export function commandUser(env: NodeJS.ProcessEnv): string {
  const sudo = env['SUDO_USER'];
  let own = 'unknown';
  try {
    own = userInfo().username;
  } catch {
    // a uid without a name (a container's)
  }
  return sudo !== undefined && sudo !== '' && sudo !== own ? `${sudo} (as ${own})` : own;
}

/**
 * Adds a command's entries to the data directory's audit trail, where the running gateway reads
 * them. A data directory that does not exist has no gateway to audit; a trail that cannot be
 * written is said on stderr and does not fail the command, which has done its work.
 */
export function recordAudit(dataDir: string, inputs: readonly AuditInput[], err: (text: string) => void): boolean {
  if (!existsSync(dataDir)) {
    err(`not in the audit trail: the data directory ${dataDir} does not exist\n`);
    return false;
  }
  try {
    const file = AuditFile.open(dataDir);
    try {
      const now = Date.now();
      file.append(
        inputs.map((input) => entryOf(input, now)),
        `cli-${process.pid}-${randomBytes(4).toString('hex')}`,
      );
    } finally {
      file.close();
    }
    return true;
  } catch (error) {
    err(`not in the audit trail of ${dataDir}: ${(error as Error).message}\n`);
    return false;
  }
}
