// Rewrites the configuration table in README.md from the settings in the code:
//   npm run build && node scripts/update-readme-config.mjs
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './lib/paths.mjs';

const readmePath = join(projectRoot, 'README.md');
const table = execFileSync(process.execPath, [join(projectRoot, 'dist', 'gateway.mjs'), 'config-table'], { encoding: 'utf8' }).trim();
const readme = readFileSync(readmePath, 'utf8');
const pattern = /(<!-- config-table:start -->\n)[\s\S]*?(<!-- config-table:end -->)/;
if (!pattern.test(readme)) throw new Error('README.md has no config-table markers');
writeFileSync(readmePath, readme.replace(pattern, `$1${table}\n$2`));
