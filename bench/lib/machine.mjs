// What the figures were measured on: recorded with every result.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/**
 * @param {string} command
 * @param {string[]} args
 * @param {string} [cwd]
 */
const run = (command, args, cwd) => {
  const result = spawnSync(command, args, { encoding: 'utf8', cwd });
  return result.error ? '' : `${result.stdout ?? ''}${result.stderr ?? ''}`.trim();
};

/**
 * @param {{ root: string, workDir: string, wrk: string, questdb: string, pinning: Record<string, string> | null }} context
 */
export function describeMachine(context) {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? 'unknown';
  const mhz = /^cpu MHz\s*:\s*(.+)$/m.exec(cpuinfo)?.[1];
  const status = run('git', ['status', '--porcelain'], context.root);
  return {
    cpuModel: model.trim(),
    cpuMhz: mhz ? Number(mhz) : null,
    // os.cpus(), not availableParallelism(): the harness itself is pinned to fewer CPUs.
    cores: os.cpus().length,
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    arch: os.arch(),
    node: process.version,
    java: run('java', ['-version']).split('\n')[0] ?? '',
    questdb: context.questdb,
    wrk: context.wrk,
    dataFilesystem: run('findmnt', ['-n', '-o', 'FSTYPE', '-T', context.workDir]) || run('stat', ['-f', '-c', '%T', context.workDir]),
    loadAverageAtStart: os.loadavg().map((l) => Math.round(l * 100) / 100),
    pinning: context.pinning,
    gitCommit: run('git', ['rev-parse', 'HEAD'], context.root),
    gitDirty: status !== '',
  };
}
