import { existsSync } from 'node:fs';

/** The environment of a person who has set nothing of the gateway's. */
export function newcomerEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (/^(HOST|PORT|HTTPS_PORT|API_KEY|API_KEY_FILE|DATA_DIR|QUESTDB_URL|NODE_OPTIONS|VITEST.*|npm_.*)$/.test(name)) delete env[name];
  }
  // better-sqlite3 compiles against the machine's Node headers, as .ci/run has it.
  if (existsSync('/usr/include/node/node.h')) env['npm_config_nodedir'] = '/usr';
  return env;
}
