import { SETTINGS } from './settings.js';

/** The configuration table, rendered from the settings themselves so the docs cannot drift. */
export function renderConfigTable(): string {
  const rows = Object.values(SETTINGS).map(
    (s) => `| \`${s.env}\` | ${s.default === undefined ? '(unset)' : `\`${s.default}\``} | ${s.doc.replaceAll('|', '\\|')} |`,
  );
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

/** docs/configuration.md, whole: written by `scripts/update-config-reference.mjs`, checked by a test. */
export function renderConfigReference(): string {
  return `# Configuration

<!-- Generated from src/config/settings.ts: npm run build && node scripts/update-config-reference.mjs -->

The gateway reads its settings from environment variables: \`/etc/harbor-gateway/gateway.env\` under
systemd, \`.env\` with compose, the shell for \`npm run local\`. An invalid value stops the start with
exit status 78 and a message naming each bad variable; \`harbor-gateway check-config\` checks the
settings without starting. Secrets are best given as files (\`API_KEY_FILE\`, \`QUESTDB_PASSWORD_FILE\`,
…) or systemd credentials, never on a command line. Forwarding to the centre (the \`UPSTREAM_*\`,
\`KAFKA_*\` and \`REMOTE_QUESTDB_*\` settings): topologies, guarantees per sink and sizing in
[fleet.md](fleet.md).

${renderConfigTable()}
`;
}
