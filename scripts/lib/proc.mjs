// Readings of a process's footprint from Linux's /proc: memory, CPU time and bytes sent to disk.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Kernel clock ticks per second, the unit of utime and stime in /proc/<pid>/stat. */
export const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * @typedef {object} ProcSample
 * @property {number} at           performance.now() when read, ms
 * @property {number} rssKb        VmRSS: resident memory now
 * @property {number} hwmKb        VmHWM: highest resident memory since the process started
 * @property {number} anonKb       RssAnon: of rssKb, the process's own memory (heaps, stacks)
 * @property {number} fileKb       RssFile: of rssKb, mapped files (node's code and ICU data, libraries), shared and reclaimable
 * @property {number} cpuSeconds   utime + stime of all its threads
 * @property {number} writeBytes   bytes the process caused to be written to storage (page cache dirtied)
 * @property {number} cancelledWriteBytes  of those, bytes dropped before writeback (files truncated or deleted)
 */

/**
 * @param {string} text
 * @param {string} key
 */
const statusKb = (text, key) => {
  const match = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
  if (!match) throw new Error(`/proc status has no ${key}`);
  return Number(match[1]);
};

/**
 * @param {string} text
 * @param {string} key
 */
const ioField = (text, key) => {
  const match = new RegExp(`^${key}: (\\d+)`, 'm').exec(text);
  if (!match) throw new Error(`/proc io has no ${key} (kernel without task I/O accounting?)`);
  return Number(match[1]);
};

/**
 * CPU seconds (user + system) of a process from /proc/<pid>/stat. The command name in field 2 may
 * hold spaces and parentheses, so fields are counted after its closing parenthesis.
 * @param {string} statText
 */
export function cpuSecondsFromStat(statText) {
  const fields = statText.slice(statText.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of the line (utime, stime) are 12 and 13 after the name.
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/**
 * User and system CPU seconds of each thread of a process, by thread id (the main thread's is the
 * pid); a thread that ends between the listing and its read is left out.
 * @param {number} pid
 * @returns {Map<string, { user: number, system: number }>}
 */
export function threadCpuSeconds(pid) {
  /** @type {Map<string, { user: number, system: number }>} */
  const threads = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      threads.set(tid, { user: Number(fields[11]) / CLOCK_TICKS, system: Number(fields[12]) / CLOCK_TICKS });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return threads;
}

/**
 * @param {number} pid
 * @returns {ProcSample}
 */
export function sampleProcess(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  return {
    at: performance.now(),
    rssKb: statusKb(status, 'VmRSS'),
    hwmKb: statusKb(status, 'VmHWM'),
    anonKb: statusKb(status, 'RssAnon'),
    fileKb: statusKb(status, 'RssFile'),
    cpuSeconds: cpuSecondsFromStat(readFileSync(`/proc/${pid}/stat`, 'utf8')),
    writeBytes: ioField(io, 'write_bytes'),
    cancelledWriteBytes: ioField(io, 'cancelled_write_bytes'),
  };
}

/**
 * CPU seconds of a process, or undefined once it is gone.
 * @param {number} pid
 */
export function cpuSeconds(pid) {
  try {
    return cpuSecondsFromStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * What happened between two samples of the same process.
 * @param {ProcSample} before
 * @param {ProcSample} after
 */
export function delta(before, after) {
  return {
    seconds: (after.at - before.at) / 1000,
    cpuSeconds: after.cpuSeconds - before.cpuSeconds,
    writeBytes: after.writeBytes - before.writeBytes,
    cancelledWriteBytes: after.cancelledWriteBytes - before.cancelledWriteBytes,
    rssKb: after.rssKb,
    hwmKb: after.hwmKb,
  };
}

/**
 * Busy and total clock ticks of each CPU from /proc/stat (busy: not idle and not waiting on I/O).
 * @returns {Map<number, { busy: number, total: number }>}
 */
export function cpuTimes() {
  /** @type {Map<number, { busy: number, total: number }>} */
  const cpus = new Map();
  for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
    const match = /^cpu(\d+) (.+)$/.exec(line);
    if (!match) continue;
    const ticks = /** @type {string} */ (match[2]).trim().split(/\s+/).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    const total = ticks.slice(0, 8).reduce((a, b) => a + b, 0);
    cpus.set(Number(match[1]), { busy: total - (ticks[3] ?? 0) - (ticks[4] ?? 0), total });
  }
  return cpus;
}

/**
 * Share of time each CPU was busy between two cpuTimes() readings, keyed by CPU number.
 * @param {Map<number, { busy: number, total: number }>} before
 * @param {Map<number, { busy: number, total: number }>} after
 * @returns {Record<string, number>}
 */
export function cpuBusyShares(before, after) {
  /** @type {Record<string, number>} */
  const shares = {};
  for (const [cpu, end] of after) {
    const start = before.get(cpu);
    if (!start || end.total === start.total) continue;
    shares[cpu] = (end.busy - start.busy) / (end.total - start.total);
  }
  return shares;
}
