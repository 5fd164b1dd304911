// compose.yaml, checked by a real Docker Compose client (`config` resolves and validates the file
// against the Compose specification), .env.example kept in step with it, and the Dockerfile's shape.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';
import { composeClient } from '../../scripts/lib/compose-client.mjs';
import { QUESTDB_VERSION, startQuestDb } from '../../scripts/lib/questdb.mjs';
import { tempDir } from '../support/temp-dir.js';

const root = join(import.meta.dirname, '..', '..');
const composeFile = join(root, 'compose.yaml');
const envExample = join(root, '.env.example');

/** The parts of `docker compose config --format json` these tests read. */
interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile: string };
  restart?: string;
  healthcheck?: { test?: string[] };
  depends_on: Record<string, { condition: string }>;
  ports: { host_ip?: string; published: string; target: number }[];
  volumes: unknown[];
  environment: Record<string, string>;
}
interface ComposeConfig {
  services: { gateway: ComposeService; grafana: ComposeService; questdb: ComposeService };
  volumes: Record<string, unknown>;
}

/** NAME=value lines of an env file. */
function readEnvFile(path: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    const match = /^([A-Z0-9_]+)=(.*)$/.exec(line);
    if (match) entries.set(match[1]!, match[2]!);
  }
  return entries;
}

describe('compose stack', () => {
  let compose: string[];
  const config = (envFile: string): ComposeConfig => {
    const [file, ...args] = compose;
    const output = execFileSync(
      file!,
      [...args, '--project-directory', root, '-f', composeFile, '--env-file', envFile, 'config', '--format', 'json'],
      {
        encoding: 'utf8',
        // The client must read only the env file given, not a developer's own .env or shell settings.
        env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? tmpdir() },
      },
    );
    return JSON.parse(output);
  };

  // The first run builds Compose from source (a few minutes); later runs find it in the cache.
  beforeAll(() => {
    compose = composeClient();
  }, 20 * 60_000);

  it('passes `docker compose config` with .env.example, with pinned images, health checks and restart policies', () => {
    const stack = config(envExample);
    expect(Object.keys(stack.services).sort()).toEqual(['gateway', 'grafana', 'questdb']);
    expect(stack.services.questdb.image).toBe(`questdb/questdb:${QUESTDB_VERSION}`);
    expect(stack.services.grafana.image).toMatch(/^grafana\/grafana:\d+\.\d+\.\d+$/);
    expect(stack.services.gateway.build).toMatchObject({ context: root, dockerfile: 'Dockerfile' });
    for (const [name, service] of Object.entries(stack.services)) {
      expect(service.restart, name).toBe('unless-stopped');
      expect(service.healthcheck?.test?.length, name).toBeGreaterThan(1);
    }
    expect(stack.services.grafana.depends_on.questdb?.condition).toBe('service_healthy');
    // Grafana waits for a gateway that accepted its settings, which include Grafana's password.
    expect(stack.services.grafana.depends_on.gateway?.condition).toBe('service_healthy');
    expect(stack.services.gateway.depends_on.questdb?.condition).toBe('service_started');
    expect(Object.keys(stack.volumes).sort()).toEqual(['gateway-data', 'grafana-data', 'questdb-data']);
  });

  it('publishes the API on 8000 (HTTP and TLS) and 8443 (HTTPS) and Grafana on 3000 on loopback, and tells the gateway where', () => {
    const { services } = config(envExample);
    const published = (service: ComposeService) => service.ports.map((p) => [p.host_ip ?? '', String(p.published), p.target]);
    expect(published(services.gateway)).toEqual([
      ['127.0.0.1', '8000', 8000],
      ['127.0.0.1', '8443', 8443],
    ]);
    expect(published(services.grafana)).toEqual([['127.0.0.1', '3000', 3000]]);
    expect(services.gateway.environment.PUBLISHED_ADDRESS).toBe('127.0.0.1');
    // One setting publishes both, and tells the gateway: the two cannot disagree.
    const lan = join(tempDir('env-lan'), '.env');
    writeFileSync(lan, 'PUBLISH_ADDRESS=0.0.0.0\n');
    const opened = config(lan).services;
    expect(opened.gateway.ports.map((p) => p.host_ip)).toEqual(['0.0.0.0', '0.0.0.0']);
    expect(opened.grafana.ports.map((p) => p.host_ip)).toEqual(['0.0.0.0']);
    expect(opened.gateway.environment.PUBLISHED_ADDRESS).toBe('0.0.0.0');
    expect(published(services.questdb)).toEqual([
      ['127.0.0.1', '9000', 9000],
      ['127.0.0.1', '8812', 8812],
    ]);
  });

  it("mounts Grafana's provisioning read-only, keeps data in named volumes, and turns sign-up and anonymous access off", () => {
    const { services } = config(envExample);
    expect(services.grafana.volumes).toContainEqual(
      expect.objectContaining({
        type: 'bind',
        source: join(root, 'grafana', 'provisioning'),
        target: '/etc/grafana/provisioning',
        read_only: true,
      }),
    );
    for (const [name, target] of [
      ['gateway', '/var/lib/harbor-gateway'],
      ['questdb', '/var/lib/questdb'],
      ['grafana', '/var/lib/grafana'],
    ] as const) {
      expect(services[name].volumes).toContainEqual(expect.objectContaining({ type: 'volume', target }));
    }
    expect(services.grafana.environment).toMatchObject({
      GF_USERS_ALLOW_SIGN_UP: 'false',
      GF_AUTH_ANONYMOUS_ENABLED: 'false',
      GF_SECURITY_ADMIN_PASSWORD: 'admin',
    });
    expect(services.grafana.environment.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH).toBe(
      '/var/lib/grafana/provisioning/dashboards/harbor/comprehensive-telemetry.json',
    );
  });

  it("takes every setting from the env file: the shipped test values, or the site's own", () => {
    const shipped = config(envExample).services;
    expect(shipped.gateway.environment).toMatchObject({
      GATEWAY_ENV: 'development',
      API_KEY: 'harbor-dev-key',
      QUESTDB_PASSWORD: 'quest',
      GRAFANA_ADMIN_PASSWORD: 'admin',
      RETENTION_DAYS: '365',
    });
    const site = join(tempDir('env'), '.env');
    const secrets = {
      API_KEY: 'site-key-0123456789abcdef',
      QUESTDB_PASSWORD: 'quest-site-pw-42',
      GRAFANA_ADMIN_PASSWORD: 'grafana-site-pw-42',
    };
    writeFileSync(
      site,
      `GATEWAY_ENV=production\nRETENTION_DAYS=90\nGATEWAY_PORT=18000\nPUBLISH_ADDRESS=192.0.2.10\n${Object.entries(secrets)
        .map(([k, v]) => `${k}=${v}`)
        .join('\n')}\n`,
    );
    const { services } = config(site);
    expect(services.gateway.environment).toMatchObject({ GATEWAY_ENV: 'production', RETENTION_DAYS: '90', ...secrets });
    expect(services.gateway.ports[0]).toMatchObject({ host_ip: '192.0.2.10', published: '18000' });
    expect(services.questdb.environment).toMatchObject({
      QDB_HTTP_PASSWORD: secrets.QUESTDB_PASSWORD,
      QDB_PG_PASSWORD: secrets.QUESTDB_PASSWORD,
      QDB_PG_READONLY_PASSWORD: secrets.QUESTDB_PASSWORD,
    });
    expect(services.grafana.environment).toMatchObject({
      GF_SECURITY_ADMIN_PASSWORD: secrets.GRAFANA_ADMIN_PASSWORD,
      QUESTDB_PASSWORD: secrets.QUESTDB_PASSWORD,
    });
  });

  it('names every setting of compose.yaml in .env.example, with the same default', () => {
    const example = readEnvFile(envExample);
    const used = new Map<string, string>();
    for (const [, name, fallback] of readFileSync(composeFile, 'utf8').matchAll(/\$\{(\w+)(?::-([^}]*))?\}/g))
      used.set(name!, fallback ?? '');
    expect([...example.keys()].sort()).toEqual([...used.keys()].sort());
    for (const [name, fallback] of used) expect(example.get(name), name).toBe(fallback);
  });

  it('gives QuestDB settings under which the gateway writes and Grafana only reads', async () => {
    const { services } = config(envExample);
    const dataDir = tempDir('compose-questdb');
    const questdb = await startQuestDb({ dataDir, heap: '512m', env: services.questdb.environment });
    try {
      const gateway = services.gateway.environment;
      const basic = `Basic ${Buffer.from(`${gateway.QUESTDB_USERNAME}:${gateway.QUESTDB_PASSWORD}`).toString('base64')}`;
      const exec = (query: string, headers: Record<string, string> = {}) =>
        fetch(`${questdb.httpUrl}/exec?query=${encodeURIComponent(query)}`, { headers });
      expect((await exec('SELECT 1')).status).toBe(401);
      expect(
        (await exec('CREATE TABLE cargo_data (time TIMESTAMP, v DOUBLE) TIMESTAMP(time) PARTITION BY DAY WAL', { authorization: basic }))
          .status,
      ).toBe(200);
      const write = await fetch(`${questdb.httpUrl}/write`, {
        method: 'POST',
        headers: { authorization: basic },
        body: 'cargo_data v=1\n',
      });
      expect(write.status).toBe(204);

      // The provisioned data source, with the compose file's values for its environment.
      const [source] = parse(readFileSync(join(root, 'grafana', 'provisioning', 'datasources', 'questdb.yaml'), 'utf8')).datasources;
      expect(services.grafana.environment.QUESTDB_PG_ADDRESS).toBe('questdb:8812');
      const grafana = new pg.Client({
        host: '127.0.0.1',
        port: questdb.pgPort,
        user: source.user,
        password: services.grafana.environment.QUESTDB_PASSWORD,
        database: source.jsonData.database,
      });
      await grafana.connect();
      try {
        expect((await grafana.query('SELECT count() AS n FROM cargo_data')).rows).toEqual([{ n: expect.any(String) }]);
        await expect(grafana.query('DROP TABLE cargo_data')).rejects.toThrow(/permission denied/i);
      } finally {
        await grafana.end();
      }
    } finally {
      await questdb.stop();
    }
  });

  it('starts with the shipped test values on loopback only: published beyond it, the gateway refuses them and says why', () => {
    const checkConfig = (envFile: string) =>
      spawnSync(process.execPath, [inject('bundlePath'), 'check-config'], {
        env: { PATH: process.env['PATH'] ?? '', ...config(envFile).services.gateway.environment },
        encoding: 'utf8',
        timeout: 20_000,
      });
    const shipped = checkConfig(envExample);
    expect(shipped.status, shipped.stderr).toBe(0);
    expect(shipped.stdout).toMatch(/^configuration valid \(development/);

    const dir = tempDir('env-published');
    const published = join(dir, 'published.env');
    writeFileSync(published, 'PUBLISH_ADDRESS=0.0.0.0\n');
    const refused = checkConfig(published);
    expect(refused.status).toBe(78);
    expect(refused.stderr).toMatch(
      /^ {2}API_KEY is a shipped test default and the gateway is reachable beyond loopback \(PUBLISHED_ADDRESS=0\.0\.0\.0\)/m,
    );
    expect(refused.stderr).toMatch(/^ {2}GRAFANA_ADMIN_PASSWORD is a shipped test default and the stack is published beyond loopback/m);
    expect(refused.stderr).not.toContain('harbor-dev-key');
    // An empty key in .env is the shipped key to compose (`:-`), refused just the same.
    const empty = join(dir, 'empty.env');
    writeFileSync(empty, 'PUBLISH_ADDRESS=0.0.0.0\nAPI_KEY=\nGRAFANA_ADMIN_PASSWORD=grafana-site-pw-42\n');
    expect(checkConfig(empty).stderr).toMatch(/^ {2}API_KEY is a shipped test default/m);

    const own = join(dir, 'own.env');
    writeFileSync(own, 'PUBLISH_ADDRESS=0.0.0.0\nAPI_KEY=site-key-0123456789abcdef\nGRAFANA_ADMIN_PASSWORD=grafana-site-pw-42\n');
    const opened = checkConfig(own);
    expect(opened.status, opened.stderr).toBe(0);
  });

  it("refuses to start in production while the compose file's shipped credentials are unchanged", () => {
    const { services } = config(envExample);
    const result = spawnSync(process.execPath, [inject('bundlePath')], {
      env: {
        PATH: process.env['PATH'] ?? '',
        ...services.gateway.environment,
        GATEWAY_ENV: 'production',
        DATA_DIR: tempDir('prod'),
        PORT: '0',
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(78);
    const output = `${result.stdout}${result.stderr}`;
    for (const name of ['API_KEY', 'QUESTDB_PASSWORD', 'GRAFANA_ADMIN_PASSWORD'])
      expect(output).toMatch(new RegExp(`^  ${name} is a shipped test default`, 'm'));
    expect(output).not.toContain('harbor-dev-key');
  });
});

describe('gateway image', () => {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  const instructions = dockerfile.split('\n').filter((l) => /^[A-Z]+ /.test(l));

  it('compiles better-sqlite3 in a build stage and runs the bundle as a non-root user with a health check', () => {
    const stages = instructions.filter((l) => l.startsWith('FROM '));
    expect(stages).toHaveLength(2);
    expect(stages[0]).toMatch(/ AS build$/);
    expect(dockerfile).toContain('npm_config_build_from_source=true');
    expect(dockerfile).toContain('RUN npm run build');
    const runStage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(runStage).toMatch(/^USER harbor$/m);
    expect(runStage).not.toMatch(/^RUN .*(apt-get|npm ci|g\+\+)/m);
    expect(runStage).toMatch(/^HEALTHCHECK .*\n.*\/healthz/m);
    expect(instructions.at(-1)).toBe('CMD ["node", "dist/gateway.mjs", "serve"]');
  });

  it('keeps secrets and local data out of the build context', () => {
    const ignore = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    expect(ignore).toContain('*');
    expect(ignore.filter((l) => l.startsWith('!'))).not.toContainEqual(expect.stringMatching(/env|data|node_modules/));
  });
});
