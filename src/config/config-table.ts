import { SETTINGS } from './settings.js';

/** The README's configuration table, rendered from the settings themselves so the two cannot drift. */
export function renderConfigTable(): string {
  const rows = Object.values(SETTINGS).map(
    (s) => `| \`${s.env}\` | ${s.default === undefined ? '(unset)' : `\`${s.default}\``} | ${s.doc.replaceAll('|', '\\|')} |`,
  );
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}
