// Writes docs/configuration.md from the settings in the code (a test fails when the two differ):
//   npm run build && node scripts/update-config-reference.mjs
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './lib/paths.mjs';

const reference = execFileSync(process.execPath, [join(projectRoot, 'dist', 'gateway.mjs'), 'config-table', '--document'], {
  encoding: 'utf8',
});
writeFileSync(join(projectRoot, 'docs', 'configuration.md'), reference);
