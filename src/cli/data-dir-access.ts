import { hostname } from 'node:os';
import { DataDirLock, SERVE, describeOwner, readLockOwner, type LockOwner } from '../queue/data-dir-lock.js';

/** Exit status when the data directory is held by another process (EX_TEMPFAIL): try again later. */
export const EXIT_IN_USE = 75;

/**
 * How a CLI command that writes reaches a data directory. With no gateway running it owns the
 * directory for the moment of its work (`owner`), so a gateway starting meanwhile waits for it.
 * With a gateway running (`beside`) it does only what is safe beside it: changes through SQLite's
 * own locking, which serialises them with the gateway's writers, or reads.
 */
export type DataDirAccess = { kind: 'owner'; release: () => void } | { kind: 'beside'; gateway: LockOwner };

/** The access for `command`, or the exit status after saying why there is none. */
export async function accessDataDir(dataDir: string, command: string, err: (text: string) => void): Promise<DataDirAccess | number> {
  const taken = await DataDirLock.take(dataDir, command);
  if (taken instanceof DataDirLock) return { kind: 'owner', release: () => taken.release() };
  if (taken.heldBy?.command === SERVE) return { kind: 'beside', gateway: taken.heldBy };
  err(`harbor-gateway: ${dataDir} is busy: held by ${describeOwner(taken.heldBy)}; try again in a moment\n`);
  return EXIT_IN_USE;
}

/**
 * The gateway serving from a data directory on this host, if one runs: its owner record names
 * `serve` and its process is alive. Only read: taking the lock to find out could hold up a gateway
 * that is starting.
 */
export function runningGateway(dataDir: string): LockOwner | undefined {
  const owner = readLockOwner(dataDir);
  if (owner?.command !== SERVE || owner.hostname !== hostname()) return undefined;
  try {
    process.kill(owner.pid, 0);
    return owner;
  } catch (error) {
    // EPERM: alive, another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? owner : undefined;
  }
}
