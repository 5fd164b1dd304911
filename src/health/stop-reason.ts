import { execFile } from 'node:child_process';
import { readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Why the gateway stopped, as its last health row and its `stopped` event say it. */
export type StopReasonCode = 'upgrade' | 'restart' | 'reboot' | 'shutdown' | 'stop';

export interface StopReason {
  code: StopReasonCode;
  /** The words after "stopped — " on the dashboard. */
  text: string;
}

/**
 * The file an update tool or an operator writes before stopping the gateway, to say why:
 * `echo upgrade > /var/lib/harbor-gateway/stop-reason`. Its first word is the reason, the rest of
 * its first line the words shown with it. Honoured once, and only when written during this run.
 */
export const STOP_REASON_FILE = 'stop-reason';

const CODES: readonly StopReasonCode[] = ['upgrade', 'restart', 'reboot', 'shutdown', 'stop'];

const DEFAULT_TEXT: Record<StopReasonCode, string> = {
  upgrade: 'for an upgrade',
  restart: 'for a restart',
  reboot: 'the board is rebooting',
  shutdown: 'the board is shutting down',
  stop: 'stopped by an operator',
};

const reason = (code: StopReasonCode, detail?: string): StopReason => ({
  code,
  text: detail === undefined || detail === '' ? DEFAULT_TEXT[code] : `${DEFAULT_TEXT[code]}: ${detail}`,
});

export interface StopContext {
  dataDir: string;
  /** The signal that asked the gateway to stop, if one did. */
  signal?: NodeJS.Signals | undefined;
  /** Epoch ms this run began: a hint file older than that is left from an earlier run. */
  startedAt: number;
  env: NodeJS.ProcessEnv;
  /** Answers `systemctl list-jobs` (systemd's queued jobs); undefined where it cannot be asked. */
  listJobs?: () => Promise<string | undefined>;
}

/**
 * Why the gateway is stopping, from what it can know: the hint file an update tool or operator
 * wrote, then systemd's queued jobs (a reboot or power-off of the board, a restart of this unit),
 * then the signal. systemd tells a service nothing else: `$SERVICE_RESULT` is only given to
 * `ExecStop=` commands, and SIGTERM is the same for a stop, a restart and a shutdown.
 */
export async function stopReason(context: StopContext): Promise<StopReason> {
  const hinted = takeHint(context.dataDir, context.startedAt);
  if (hinted !== undefined) return hinted;
  if (context.env['INVOCATION_ID'] !== undefined) {
    const jobs = await (context.listJobs ?? listSystemdJobs)();
    const fromJobs = jobs === undefined ? undefined : reasonFromJobs(jobs, unitName());
    if (fromJobs !== undefined) return fromJobs;
  }
  if (context.signal === 'SIGINT') return reason('stop', 'interrupted (SIGINT)');
  if (context.signal !== undefined) return reason('stop', context.signal);
  return reason('stop');
}

/** The hint file's reason when it was written during this run; the file is removed either way. */
function takeHint(dataDir: string, startedAt: number): StopReason | undefined {
  const path = join(dataDir, STOP_REASON_FILE);
  let text: string;
  let written: number;
  try {
    written = statSync(path).mtimeMs;
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  rmSync(path, { force: true });
  if (written < startedAt - 1000) return undefined;
  return parseHint(text);
}

/** `upgrade to 0.5.0` → upgrade, "for an upgrade: to 0.5.0"; an unknown first word is kept as words. */
export function parseHint(text: string): StopReason | undefined {
  // One line of printable text: it goes into a health row and an alert.
  const line = (text.split('\n')[0] ?? '')
    .replace(/[\p{Cc}\p{Cf}]/gu, '')
    .trim()
    .slice(0, 200);
  if (line === '') return undefined;
  const [first = '', ...rest] = line.split(/\s+/);
  const code = CODES.find((c) => c === first.toLowerCase());
  return code === undefined ? reason('stop', line) : reason(code, rest.join(' '));
}

/**
 * A reason from `systemctl list-jobs --no-legend` (lines `ID UNIT TYPE STATE`): a queued reboot or
 * power-off of the board, or a restart job of this unit (systemd keeps the type `restart` while it
 * stops the unit, and turns it into `start` afterwards).
 */
export function reasonFromJobs(jobs: string, unit: string): StopReason | undefined {
  const rows = jobs
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields.length >= 3);
  const has = (target: string, type?: string) => rows.some(([, name, kind]) => name === target && (type === undefined || kind === type));
  if (has('reboot.target') || has('kexec.target') || has('soft-reboot.target')) return reason('reboot');
  if (has('poweroff.target') || has('halt.target') || has('shutdown.target')) return reason('shutdown');
  if (has(unit, 'restart')) return reason('restart');
  return undefined;
}

/** This process's systemd unit, from its control group (`0::/system.slice/harbor-gateway.service`). */
function unitName(): string {
  try {
    const match = /([^/\n]+\.service)\s*$/m.exec(readFileSync('/proc/self/cgroup', 'utf8'));
    if (match?.[1] !== undefined) return match[1];
  } catch {
    // Not Linux, or no /proc: the name the unit ships with.
  }
  return 'harbor-gateway.service';
}

/** systemd's queued jobs, or undefined when systemctl cannot answer within a second. */
function listSystemdJobs(): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('systemctl', ['list-jobs', '--no-legend', '--no-pager'], { timeout: 1000 }, (error, stdout) =>
      resolve(error === null ? stdout : undefined),
    );
  });
}
