import type { Config } from '../config/config.js';
import type { SinkSpec } from './registry.js';
import { specBase } from './spec-base.js';
import { remoteQuestDbSpec } from './remote-questdb/remote-questdb-spec.js';
import { describeUpstream } from './upstream/upstream-target.js';
import { describeKafka } from './kafka/describe-kafka.js';

/**
 * The sinks the configuration asks for, the local QuestDB first (loadConfig refuses a configuration
 * without any); `instance`: this gateway's, which the remote sinks send with its own readings.
 */
export function sinkSpecs(config: Config, instance?: string): SinkSpec[] {
  return [
    localQuestDbSpec(config),
    remoteQuestDbSpec(config, instance),
    upstreamSpec(config, instance),
    kafkaSpec(config, instance),
  ].filter((spec) => spec !== undefined);
}

function localQuestDbSpec(config: Config): SinkSpec | undefined {
  if (!config.localQuestdb) return undefined;
  return {
    kind: 'questdb',
    name: 'questdb',
    // The local QuestDB is the site's own record: it never drops, and it starts with what is queued.
    policy: 'block',
    backfill: true,
    batchReadings: config.flushBatchReadings,
    // The site's own dashboards read it: a remote sink's longer interval never holds it back.
    flushIntervalMs: config.flushIntervalMs,
    site: config.siteId,
    // On the appliance QuestDB shares the gateway's power: what it acknowledged last can be lost.
    replayWindowMs: config.replayWindowMs,
    questdb: {
      url: config.questdbUrl,
      username: config.questdbUsername,
      password: config.questdbPassword,
      timeoutMs: config.flushTimeoutMs,
    },
    describe: config.questdbUrl,
    table: config.table,
    retentionDays: config.retentionDays,
    resumesWal: true,
  };
}

function upstreamSpec(config: Config, instance: string | undefined): SinkSpec | undefined {
  const upstream = config.upstream;
  if (upstream === undefined) return undefined;
  return {
    kind: 'upstream',
    ...specBase('upstream', upstream, config.siteId, instance),
    describe: describeUpstream(upstream.url, upstream.proxy),
    url: upstream.url,
    apiKey: upstream.apiKey,
    caFile: upstream.caFile,
    proxy: upstream.proxy,
    timeoutMs: upstream.timeoutMs,
    maxBodyBytes: upstream.maxBodyBytes,
    compression: upstream.compression,
  };
}

function kafkaSpec(config: Config, instance: string | undefined): SinkSpec | undefined {
  const kafka = config.kafka;
  if (kafka === undefined) return undefined;
  return {
    kind: 'kafka',
    ...specBase('kafka', kafka, config.siteId, instance),
    kafka,
    describe: describeKafka(kafka),
  };
}
