import { ConfigError, loadConfig } from './config.js';

/** What `check-config` finds: the line it prints when the configuration is valid, else every problem. */
export type ConfigCheck = { valid: true; summary: string } | { valid: false; problems: string[] };

/** Loads the configuration as `serve` would and says what is wrong with it, without starting anything. */
export function checkConfig(env: Record<string, string | undefined> = process.env): ConfigCheck {
  try {
    const config = loadConfig(env);
    return { valid: true, summary: `configuration valid (${config.environment}, API key from ${config.apiKeySource})` };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { valid: false, problems: error.problems };
  }
}
