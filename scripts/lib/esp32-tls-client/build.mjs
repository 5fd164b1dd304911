// Builds the mbedTLS proof client into the shared cache, once per version of its source:
//   import { buildEsp32TlsClient } from './scripts/lib/esp32-tls-client/build.mjs'; const bin = buildEsp32TlsClient();
//   node scripts/lib/esp32-tls-client/build.mjs   prints the binary's path
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { aptInstall } from '../apt.mjs';
import { cacheDir } from '../paths.mjs';

const SOURCE = fileURLToPath(new URL('client.c', import.meta.url));

/** The path of the compiled client; installs gcc and libmbedtls-dev when missing. */
export function buildEsp32TlsClient() {
  const digest = createHash('sha256').update(readFileSync(SOURCE)).digest('hex').slice(0, 16);
  const binary = join(cacheDir(), `esp32-tls-client-${digest}`);
  if (existsSync(binary)) return binary;
  aptInstall(['gcc', 'libc6-dev'], '/usr/bin/gcc');
  aptInstall(['libmbedtls-dev'], '/usr/include/mbedtls/ssl.h');
  // Compiled under a temporary name and renamed, so concurrent runs never run half a file.
  const partial = `${binary}.${process.pid}.part`;
  execFileSync('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-o', partial, SOURCE, '-lmbedtls', '-lmbedx509', '-lmbedcrypto'], {
    stdio: 'inherit',
  });
  renameSync(partial, binary);
  return binary;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.stdout.write(`${buildEsp32TlsClient()}\n`);
