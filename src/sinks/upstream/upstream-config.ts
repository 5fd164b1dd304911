import type { RemoteSinkSettings } from '../sink.js';

/** The upstream sink's settings, resolved (`UPSTREAM_*`); present only when `UPSTREAM_URL` is set. */
export interface UpstreamSinkConfig extends RemoteSinkSettings {
  /** The destination's batch endpoint, whole. */
  url: string;
  apiKey: string;
  /** Where the key came from, for the startup log (never the key itself). */
  apiKeySource: 'environment' | 'file' | 'systemd credential';
  caFile: string | undefined;
  proxy: string | undefined;
  timeoutMs: number;
  maxBodyBytes: number;
}
