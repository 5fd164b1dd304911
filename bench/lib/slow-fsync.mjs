// A card whose fsync is slow, for the benches: a small shared library, preloaded into the gateway
// (LD_PRELOAD), that makes every fsync and fdatasync of the process wait `HARBOR_FSYNC_DELAY_US`
// microseconds before the real one, in the thread that called it, as a slow device keeps that
// thread waiting. SQLite and Node (libuv) both call the C library's functions, so both are slowed.
// Built once with the system C compiler into the cache.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from '../../scripts/lib/paths.mjs';

const SOURCE = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

static long delay_ns(void) {
  static long ns = -1;
  if (ns < 0) {
    const char *us = getenv("HARBOR_FSYNC_DELAY_US");
    ns = us == NULL ? 0 : atol(us) * 1000L;
  }
  return ns;
}

static void wait_delay(void) {
  long ns = delay_ns();
  if (ns <= 0) return;
  struct timespec t = { ns / 1000000000L, ns % 1000000000L };
  while (nanosleep(&t, &t) != 0) {}
}

int fsync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  wait_delay();
  return real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  wait_delay();
  return real(fd);
}
`;

/**
 * The environment that slows every fsync of a process by `ms`; empty for 0.
 * @param {number} ms
 * @returns {Record<string, string>}
 */
export function slowFsyncEnv(ms) {
  if (ms <= 0) return {};
  return { LD_PRELOAD: slowFsyncLibrary(), HARBOR_FSYNC_DELAY_US: String(Math.round(ms * 1000)) };
}

function slowFsyncLibrary() {
  const dir = join(cacheDir(), 'slow-fsync');
  const library = join(dir, `slow-fsync-${createHash('sha256').update(SOURCE).digest('hex').slice(0, 16)}.so`);
  if (existsSync(library)) return library;
  mkdirSync(dir, { recursive: true });
  const source = join(dir, `slow-fsync-${process.pid}.c`);
  const partial = `${library}.${process.pid}.part`;
  writeFileSync(source, SOURCE);
  try {
    execFileSync('cc', ['-shared', '-fPIC', '-O2', '-o', partial, source, '-ldl'], { stdio: ['ignore', 'inherit', 'inherit'] });
    renameSync(partial, library);
  } finally {
    rmSync(source, { force: true });
    rmSync(partial, { force: true });
  }
  return library;
}
