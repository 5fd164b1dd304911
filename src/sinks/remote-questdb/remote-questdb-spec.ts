import type { Config } from '../../config/config.js';
import type { QuestDbSinkSpec } from '../registry.js';
import { specBase } from '../spec-base.js';

export const REMOTE_QUESTDB_SINK = 'remote-questdb';

/**
 * A remote QuestDB (QuestDB Enterprise, or a central server behind a TLS proxy): the local QuestDB
 * sink's delivery with another client, ILP/HTTPS with a bearer token. The table's TTL stays the
 * central operator's; undefined unless REMOTE_QUESTDB_URL is set.
 */
export function remoteQuestDbSpec(config: Config, instance?: string): QuestDbSinkSpec | undefined {
  const remote = config.remoteQuestdb;
  if (remote === undefined) return undefined;
  return {
    kind: 'questdb',
    ...specBase(REMOTE_QUESTDB_SINK, remote, config.siteId, instance),
    // Writes go on kept-alive connections: what a table dropped at the centre took with it is sent again.
    replayWindowMs: config.replayWindowMs,
    questdb: {
      url: remote.url,
      username: undefined,
      password: undefined,
      token: remote.token,
      ca: remote.ca,
      timeoutMs: config.flushTimeoutMs,
      compression: remote.compression,
    },
    describe: `${remote.url} (table ${remote.table})`,
    table: remote.table,
    retentionDays: undefined,
    resumesWal: false,
    // No central gateway between: the sites keep their claims in the remote QuestDB itself.
    claims: { gateway: config.gatewayName, expiryMs: config.siteClaimExpiryDays * 86_400_000 },
  };
}
