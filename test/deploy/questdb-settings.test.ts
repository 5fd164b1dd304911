import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QUESTDB_GUARANTEE_SETTINGS } from '../../scripts/lib/questdb.mjs';

const root = join(import.meta.dirname, '..', '..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');

describe('every QuestDB the project starts runs with the settings the guarantees assume', () => {
  it('sets each of them in the systemd unit, the compose stack and the scripts that start QuestDB', () => {
    const unit = read('systemd/harbor-questdb.service');
    const compose = read('compose.yaml');
    expect(Object.keys(QUESTDB_GUARANTEE_SETTINGS)).toEqual([
      'QDB_LINE_AUTO_CREATE_NEW_TABLES',
      'QDB_LINE_AUTO_CREATE_NEW_COLUMNS',
      'QDB_CAIRO_TTL_USE_WALL_CLOCK',
    ]);
    for (const [name, value] of Object.entries(QUESTDB_GUARANTEE_SETTINGS)) {
      expect(unit).toMatch(new RegExp(`^Environment=${name}=${value}$`, 'm'));
      expect(compose).toMatch(new RegExp(`^ {6}${name}: "${value}"$`, 'm'));
    }
  });
});
