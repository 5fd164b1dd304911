// Going back to the previous release without a shell: the other slot still holds the release the
// last update replaced, confirmed then. The board restarts into it on trial, as after an update,
// and keeps it once its gateway is ready; when that release reads an older queue format, the queue
// file is set aside and its readings handed over (handover.mjs).
import { bootedSlot, writeTrial } from './boot-state.mjs';
import { setAsideForRollback } from './handover.mjs';
import { audit, dropTrialRecord, log, readLast, readTrial, releaseInfo, run, sleep, writeTrialRecord } from './records.mjs';

/**
 * The release the board can go back to, or why there is none: the other slot holds the release the
 * last update (or going back) replaced, as long as that update was confirmed.
 * @param {{ booted: { slot: 'A' | 'B' | undefined, trial: boolean }, pending: import('./records.mjs').Trial | undefined,
 *   last: import('./records.mjs').Trial | undefined }} state
 * @returns {{ version: string, slot: 'A' | 'B', queueFormat: number | undefined } | { unavailable: string }}
 */
export function previousRelease({ booted, pending, last }) {
  if (booted.slot === undefined) return { unavailable: 'the board was not started by the appliance boot script' };
  if (booted.trial) return { unavailable: 'the board runs a release on trial; wait until it is confirmed or rolled back' };
  if (pending !== undefined) return { unavailable: `an update to ${pending.to} is under way` };
  if (last === undefined) return { unavailable: 'nothing was installed since the card was flashed: the other slot holds no release' };
  if (last.status !== 'good' || last.slot !== booted.slot)
    return {
      unavailable: `the other slot holds ${last.to}, which ${last.kind === 'rollback' ? 'was gone back to but ' : ''}was not confirmed`,
    };
  return { version: last.from, slot: booted.slot === 'A' ? 'B' : 'A', queueFormat: last.fromQueueFormat };
}

/** The previous release of the board as it runs now. */
export const previousOfThisBoard = () => previousRelease({ booted: bootedSlot(), pending: readTrial(), last: readLast() });

/**
 * Goes back to the previous release: the console's answer first (the gateway stops taking readings
 * a moment later), the queue handed over when that release reads an older format, then the other
 * slot tried at the next boot, and the reboot.
 * @param {{ to?: string, source: string, tell: (verdict: import('./console-channel.mjs').Verdict) => void, pauseMs?: number }} options
 */
export async function rollBack({ to, source, tell, pauseMs = 3000 }) {
  const previous = previousOfThisBoard();
  const refuse = (/** @type {string} */ reason) => {
    tell({ state: 'refused', message: `Nothing was changed: ${reason}.` });
    log(`going back refused: ${reason}`);
    audit(
      'update_rolled_back',
      'refused',
      to ?? ('version' in previous ? previous.version : 'the previous release'),
      `asked by ${source}: ${reason}`,
    );
    return 1;
  };
  if ('unavailable' in previous) return refuse(previous.unavailable);
  if (to !== undefined && to !== previous.version)
    return refuse(`the page offered ${to}, but the previous release is now ${previous.version}; reload the page`);
  const running = releaseInfo();
  const from = running['APPLIANCE_VERSION'] ?? '?';
  const format = Number(running['QUEUE_FORMAT'] ?? 0);
  const handover = previous.queueFormat === undefined || previous.queueFormat < format;
  tell({
    state: 'installing',
    message: `Going back to ${previous.version} (slot ${previous.slot}): the gateway stops taking readings now and the board restarts into ${previous.version} on trial, which it keeps once its gateway is ready, as after an update.${handover ? ` ${previous.version} reads an older queue format: the readings queued now are handed over to it.` : ''} The outcome is on the board's screen and in harbor-update-result.txt.`,
  });
  await sleep(pauseMs);
  /** @type {import('./records.mjs').Trial} */
  const trial = {
    from,
    to: previous.version,
    slot: previous.slot,
    startedAt: new Date().toISOString(),
    source,
    status: 'installing',
    kind: 'rollback',
    fromQueueFormat: format,
  };
  writeTrialRecord(trial);
  if (handover) {
    run('systemctl', ['stop', 'harbor-gateway.service']);
    const setAside = setAsideForRollback({ from, to: previous.version });
    if ('problem' in setAside) {
      dropTrialRecord();
      run('systemctl', ['start', 'harbor-gateway.service']);
      log(`going back to ${previous.version} stopped: ${setAside.problem}; ${from} runs on`);
      audit('update_rolled_back', 'failed', previous.version, `asked by ${source}: ${setAside.problem}; ${from} runs on`);
      return 1;
    }
  }
  writeTrialRecord({ ...trial, status: 'installed' });
  writeTrial(previous.slot, 1);
  log(`going back to ${previous.version} in slot ${previous.slot}; restarting into it on trial`);
  audit(
    'update_rolled_back',
    'ok',
    previous.version,
    `asked by ${source}: from ${from}, restarting into slot ${previous.slot} on trial; kept once its gateway is ready`,
  );
  run('systemctl', ['reboot']);
  return 0;
}
