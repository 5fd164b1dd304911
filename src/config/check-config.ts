import { ConfigError, loadConfig } from './config.js';
import { siteFallbackNotice } from './site-name.js';

/**
 * What `check-config` finds: the line it prints when the configuration is valid, with what it
 * should be told (a forwarding site's fallen-back site id), else every problem.
 */
export type ConfigCheck = { valid: true; summary: string; notices: string[] } | { valid: false; problems: string[] };

/** Loads the configuration as `serve` would and says what is wrong with it, without starting anything. */
export function checkConfig(env: Record<string, string | undefined> = process.env): ConfigCheck {
  try {
    const config = loadConfig(env);
    const notice = config.forwards ? siteFallbackNotice({ name: config.siteId, source: config.siteIdSource }) : undefined;
    return {
      valid: true,
      summary: `configuration valid (${config.environment}, API key from ${config.apiKeySource})`,
      notices: notice === undefined ? [] : [notice],
    };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { valid: false, problems: error.problems };
  }
}
