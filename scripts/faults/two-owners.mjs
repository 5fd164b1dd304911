// Two gateways on one data directory while a load runs: in every round of the crash-consistency
// run, a second `serve` is started on the gateway's DATA_DIR while six clients push readings. It
// must refuse (exit 75, naming the owner's pid) and the first must keep serving; then the first is
// killed with SIGKILL and the next round's gateway must start on the directory at once (the kernel
// dropped the lock). Afterwards every reading answered 2xx is in QuestDB exactly once.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { runCrashConsistency } from '../lib/crash-consistency.mjs';
import { GATEWAY_NODE_OPTIONS } from '../lib/node-options.mjs';

const run = promisify(execFile);

/**
 * @param {{ rounds: number, questdbUrl: string, bundlePath: string, log?: (line: string) => void }} options
 * @returns {Promise<{ ok: boolean, report: import('../lib/crash-consistency.mjs').CrashReport,
 *   second: { refused: number, namedOwner: number, started: number } }>}
 */
export async function runTwoOwners({ rounds, questdbUrl, bundlePath, log = () => undefined }) {
  const second = { refused: 0, namedOwner: 0, started: 0 };
  const report = await runCrashConsistency({
    rounds,
    durability: 'power-loss',
    questdbUrl,
    bundlePath,
    log,
    // Long enough rounds for a second Node process to start and refuse while the load runs.
    roundMs: { min: 800, max: 1500 },
    duringRound: async (gateway, env) => {
      const attempt = await run(process.execPath, [bundlePath, 'serve'], {
        env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: GATEWAY_NODE_OPTIONS, HOST: '127.0.0.1', PORT: '0', HTTPS_PORT: '0', ...env },
        timeout: 20_000,
      }).then(
        () => ({ code: 0, stderr: '' }),
        (/** @type {{ code: number | string, stderr: string }} */ error) => ({ code: error.code, stderr: error.stderr }),
      );
      if (attempt.code === 75) second.refused += 1;
      else second.started += 1;
      if (attempt.stderr.includes(`pid ${gateway.pid}`)) second.namedOwner += 1;
    },
  });
  const violations = report.missing.length + report.forbidden.length + report.strangers.length + report.duplicates;
  const ok = violations === 0 && second.refused === rounds && second.namedOwner === rounds;
  log(
    `two gateways on one DATA_DIR: ${ok ? 'PASS' : 'FAIL'} answered ${report.ok}, stored ${report.stored}, lost ${report.missing.length}, ` +
      `duplicates ${report.duplicates}, refused but stored ${report.forbidden.length}; second gateway refused in ${second.refused} of ${rounds} rounds ` +
      `(owner's pid named in ${second.namedOwner}, started ${second.started})`,
  );
  return { ok, report, second };
}
