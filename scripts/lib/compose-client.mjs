// Finds a Docker Compose client for checking compose.yaml, or builds one. The machine's own comes
// first (`docker compose`, then `docker-compose`); without one, Compose v2 is built from its Go
// module (fetched through the Go module proxy) into ~/.cache/harbor-gateway, once: the first build
// takes a few minutes, later runs reuse the binary. Go is taken from PATH, or from Debian's
// golang-go package, which fetches the newer toolchain Compose needs through the proxy as well.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from './paths.mjs';

export const COMPOSE_MODULE = 'github.com/docker/compose/v2';
export const COMPOSE_VERSION = 'v2.40.3';

/** True when `command args... version` runs and names Compose v2 or newer. */
function isCompose(/** @type {string[]} */ command) {
  const [file, ...args] = command;
  const result = spawnSync(/** @type {string} */ (file), [...args, 'version'], { encoding: 'utf8', timeout: 30_000 });
  return result.status === 0 && /version v?([2-9]|\d\d)\./i.test(result.stdout);
}

function findGo() {
  if (spawnSync('go', ['version']).status === 0) return 'go';
  if (process.getuid?.() !== 0)
    throw new Error('building Docker Compose needs Go: install golang-go, or run as root so it can be installed');
  execFileSync('apt-get', ['update'], { stdio: 'inherit' });
  execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'golang-go'], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return 'go';
}

/** Builds Compose into the cache and returns the binary's path. */
export function buildCompose() {
  const binary = join(cacheDir(), `docker-compose-${COMPOSE_VERSION}`);
  if (existsSync(binary) && isCompose([binary])) return binary;
  const go = findGo();
  const work = mkdtempSync(join(cacheDir(), 'compose-build-'));
  // A private module and build cache, removed afterwards: they take over 600 MB.
  const env = {
    ...process.env,
    GOPATH: join(work, 'gopath'),
    GOMODCACHE: join(work, 'gopath', 'pkg', 'mod'),
    GOCACHE: join(work, 'gocache'),
    GOFLAGS: '-modcacherw -buildvcs=false',
    GOTOOLCHAIN: 'auto',
    CGO_ENABLED: '0',
  };
  try {
    const download = JSON.parse(
      execFileSync(go, ['mod', 'download', '-json', `${COMPOSE_MODULE}@${COMPOSE_VERSION}`], { cwd: work, env, encoding: 'utf8' }),
    );
    // Built inside its own module: its go.mod has exclude directives, which `go install pkg@version` refuses.
    const source = join(work, 'src');
    cpSync(download.Dir, source, { recursive: true });
    const partial = `${binary}.${process.pid}.part`;
    execFileSync(
      go,
      ['build', '-trimpath', '-ldflags', `-s -w -X ${COMPOSE_MODULE}/internal.Version=${COMPOSE_VERSION}`, '-o', partial, './cmd'],
      { cwd: source, env, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    renameSync(partial, binary);
    return binary;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The command to run Compose with: the machine's own, or one built into the cache. */
export function composeClient() {
  for (const command of [['docker', 'compose'], ['docker-compose']]) if (isCompose(command)) return command;
  return [buildCompose()];
}
