import { utimesSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../test/support/temp-dir.js';
import { parseHint, reasonFromJobs, STOP_REASON_FILE, stopReason } from './stop-reason.js';

// `systemctl list-jobs --no-legend` during a reboot of the board and during `systemctl restart`.
const REBOOT_JOBS = `1587 reboot.target                 start waiting
1591 systemd-reboot.service         start waiting
1602 harbor-gateway.service         stop  running
1588 shutdown.target                start waiting
`;
const RESTART_JOBS = '2210 harbor-gateway.service restart running\n';
const POWEROFF_JOBS = '31 poweroff.target start waiting\n32 harbor-gateway.service stop running\n';

describe('the stop reason', () => {
  it('takes the first word of the hint file as the reason and the rest as words', () => {
    expect(parseHint('upgrade to 0.5.0\n')).toEqual({ code: 'upgrade', text: 'for an upgrade: to 0.5.0' });
    expect(parseHint('Restart')).toEqual({ code: 'restart', text: 'for a restart' });
    expect(parseHint('moving the board to the other quay')).toEqual({
      code: 'stop',
      text: 'stopped by an operator: moving the board to the other quay',
    });
    expect(parseHint('  \n')).toBeUndefined();
    // One line of printable text: it goes into a health row and an alert.
    expect(parseHint('upgrade\u0007 now\nsecond line')?.text).toBe('for an upgrade: now');
  });

  it("reads systemd's queued jobs: a reboot or power-off of the board, a restart of this unit", () => {
    expect(reasonFromJobs(REBOOT_JOBS, 'harbor-gateway.service')?.code).toBe('reboot');
    expect(reasonFromJobs(POWEROFF_JOBS, 'harbor-gateway.service')?.code).toBe('shutdown');
    expect(reasonFromJobs(RESTART_JOBS, 'harbor-gateway.service')?.code).toBe('restart');
    expect(reasonFromJobs(RESTART_JOBS, 'other.service')).toBeUndefined();
    expect(reasonFromJobs('', 'harbor-gateway.service')).toBeUndefined();
  });

  it('prefers a hint written during this run, removes it, and ignores one left from before', async () => {
    const dataDir = tempDir('stop-reason');
    const hint = join(dataDir, STOP_REASON_FILE);
    const startedAt = Date.now() - 60_000;
    writeFileSync(hint, 'upgrade\n');
    const listJobs = async () => RESTART_JOBS;
    expect(await stopReason({ dataDir, startedAt, env: { INVOCATION_ID: 'x' }, listJobs, signal: 'SIGTERM' })).toMatchObject({
      code: 'upgrade',
    });
    expect(existsSync(hint)).toBe(false);
    writeFileSync(hint, 'upgrade\n');
    const before = (startedAt - 3_600_000) / 1000;
    utimesSync(hint, before, before);
    expect(await stopReason({ dataDir, startedAt, env: { INVOCATION_ID: 'x' }, listJobs, signal: 'SIGTERM' })).toMatchObject({
      code: 'restart',
    });
    expect(existsSync(hint)).toBe(false);
  });

  it('asks systemd only when running under it, and otherwise names the signal', async () => {
    const dataDir = tempDir('stop-reason');
    const listJobs = async () => REBOOT_JOBS;
    const startedAt = Date.now();
    expect(await stopReason({ dataDir, startedAt, env: { INVOCATION_ID: 'x' }, listJobs, signal: 'SIGTERM' })).toMatchObject({
      code: 'reboot',
    });
    expect(await stopReason({ dataDir, startedAt, env: {}, listJobs, signal: 'SIGTERM' })).toEqual({
      code: 'stop',
      text: 'stopped by an operator: SIGTERM',
    });
    expect(await stopReason({ dataDir, startedAt, env: {}, signal: 'SIGINT' })).toEqual({
      code: 'stop',
      text: 'stopped by an operator: interrupted (SIGINT)',
    });
    // systemctl that does not answer: the signal decides.
    expect(
      await stopReason({ dataDir, startedAt, env: { INVOCATION_ID: 'x' }, listJobs: async () => undefined, signal: 'SIGTERM' }),
    ).toMatchObject({ code: 'stop' });
  });
});
