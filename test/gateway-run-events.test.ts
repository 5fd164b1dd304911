// The gateway's own account of its runs, from the built bundle as its own process: the tables and
// the start it records as it starts, the last health row at a stop with the reason it found (the
// hint file, systemd's queued jobs, the signal), the next start worded from it, and the site's
// catalogue written to QuestDB at start, on a change of the file and on SIGHUP.
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { STOP_REASON_FILE } from '../src/health/stop-reason.js';
import { TEST_KEY } from './support/gateway.js';
import { spawnGateway, type GatewayProcess } from './support/process.js';
import { sql, waitForCount } from './support/questdb-sql.js';
import { tempDir } from './support/temp-dir.js';
import { waitUntil } from './support/wait.js';

const unique = (label: string) => `${label}-${process.pid}-${Date.now()}`;

function start(name: string, dataDir: string, env: Record<string, string> = {}): Promise<GatewayProcess> {
  return spawnGateway({ API_KEY: TEST_KEY, DATA_DIR: dataDir, QUESTDB_URL: inject('questdbUrl'), GATEWAY_NAME: name, ...env });
}

async function stop(gw: GatewayProcess, signal: NodeJS.Signals): Promise<void> {
  gw.child.kill(signal);
  expect(await gw.exited).toEqual({ code: 0, signal: null });
}

/** The gateway's events, oldest first, once `count` of them are in QuestDB. */
async function eventsOf(name: string, count: number): Promise<[string, string, string][]> {
  const where = `FROM gateway_events WHERE gateway = '${name}'`;
  expect(await waitForCount(`SELECT count() ${where}`, count)).toBe(count);
  return (await sql<[string, string, string]>(`SELECT event, reason, text ${where} ORDER BY time`)).dataset;
}

/** The gateway's last health row, once it is a stop row. */
async function lastRow(name: string): Promise<[string, string, boolean]> {
  const where = `FROM gateway_health WHERE gateway = '${name}' AND state = 'stopped'`;
  await waitForCount(`SELECT count() ${where}`, 1);
  const [row] = (
    await sql<[string, string, boolean]>(
      `SELECT state, state_text, ready FROM gateway_health WHERE gateway = '${name}' LATEST ON time PARTITION BY gateway`,
    )
  ).dataset;
  return row!;
}

describe('a run of the gateway as its health rows tell it', () => {
  it('records its start as it starts, says it stopped and why in its last row, and words the next start from it', async () => {
    const name = unique('gw-run');
    const dataDir = tempDir('run-events');
    let gw = await start(name, dataDir);
    expect(await eventsOf(name, 1)).toEqual([
      ['started', 'first_start', expect.stringMatching(/^started \S+ \(no earlier run on this data directory\)$/)],
    ]);
    // What an update tool writes before it stops the gateway.
    writeFileSync(join(dataDir, STOP_REASON_FILE), 'upgrade to the next release\n');
    await stop(gw, 'SIGTERM');
    expect(await lastRow(name)).toEqual(['stopped', 'stopped — for an upgrade: to the next release', false]);
    expect(gw.logs.find((l) => l.event === 'stop_reason')).toMatchObject({ reason: 'upgrade', reported: true });

    gw = await start(name, dataDir);
    const events = await eventsOf(name, 3);
    expect(events[1]).toEqual(['stopped', 'upgrade', 'stopped — for an upgrade: to the next release']);
    // The same version came back: a restart, though the stop was announced as an upgrade.
    expect(events[2]).toEqual([
      'started',
      'restart',
      expect.stringMatching(/^started \S+ after a restart \(stopped for an upgrade; the version is the same\), down \d+ s$/),
    ]);
    // No hint this time: the signal is the reason.
    await stop(gw, 'SIGINT');
    await waitUntil('the second stop row', async () => (await lastRow(name))[1] !== 'stopped — for an upgrade: to the next release');
    expect(await lastRow(name)).toEqual(['stopped', 'stopped — stopped by an operator: interrupted (SIGINT)', false]);
  });

  it("asks systemd's queued jobs why it stops when it runs under systemd", async () => {
    const name = unique('gw-systemd');
    // A stand-in for systemctl, answering `list-jobs` as systemd does while the board reboots.
    const bin = tempDir('systemctl');
    writeFileSync(
      join(bin, 'systemctl'),
      '#!/bin/sh\nprintf "1587 reboot.target start waiting\\n1602 harbor-gateway.service stop running\\n"\n',
    );
    chmodSync(join(bin, 'systemctl'), 0o755);
    const gw = await start(name, tempDir('run-events'), { INVOCATION_ID: 'a1b2c3', PATH: `${bin}:${process.env.PATH ?? ''}` });
    await stop(gw, 'SIGTERM');
    expect(await lastRow(name)).toEqual(['stopped', 'stopped — the board is rebooting', false]);
  });

  it('retires its previous name when GATEWAY_NAME changed', async () => {
    const [before, after] = [unique('gw-old'), unique('gw-new')];
    const dataDir = tempDir('run-events');
    await stop(await start(before, dataDir), 'SIGTERM');
    const gw = await start(after, dataDir);
    expect(await eventsOf(before, 3)).toEqual([
      ['started', 'first_start', expect.any(String)],
      ['stopped', 'stop', expect.any(String)],
      ['retired', 'renamed', `renamed to ${after}`],
    ]);
    await stop(gw, 'SIGTERM');
  });
});

describe("the site's catalogue in QuestDB", () => {
  /** The newest version of the gateway's cargo catalogue: its patterns and names, in order. */
  const cargoOf = async (name: string) =>
    (
      await sql<[string, string]>(
        `SELECT pattern, name FROM cargo_catalogue WHERE gateway = '${name}' AND position > 0 AND time = (SELECT max(time) FROM cargo_catalogue WHERE gateway = '${name}') ORDER BY position`,
      )
    ).dataset;

  it('is written at start, again when the file changes or on SIGHUP, and a file with a mistake leaves it as it was', async () => {
    const name = unique('gw-catalogue');
    const file = join(tempDir('catalogue'), 'catalogue.yaml');
    writeFileSync(file, 'ships:\n  ship-1: MV One\ncargo:\n  - match: temp*\n    name: Temperature\n    unit: °C\n');
    const gw = await start(name, tempDir('run-events'), { CATALOGUE_FILE: file });
    try {
      await waitUntil('the catalogue at start', async () => (await cargoOf(name)).length === 1);
      expect(await cargoOf(name)).toEqual([['temp*', 'Temperature']]);
      const ships = await sql<[string, string]>(
        `SELECT ship_id, name FROM ship_catalogue WHERE gateway = '${name}' AND ship_id IS NOT NULL`,
      );
      expect(ships.dataset).toEqual([['ship-1', 'MV One']]);

      writeFileSync(file, 'cargo:\n  - match: reefer4_temp\n    name: Reefer 4\n    max: 8\n  - match: temp*\n    name: Temperature\n');
      await waitUntil('the changed catalogue', async () => (await cargoOf(name)).length === 2, 10_000);
      expect(await cargoOf(name)).toEqual([
        ['reefer4_temp', 'Reefer 4'],
        ['temp*', 'Temperature'],
      ]);

      writeFileSync(file, 'cargo:\n  - match: a*b*c\n');
      await waitUntil('the refusal', () => gw.logs.some((l) => l.event === 'catalogue_invalid'), 10_000);
      expect(gw.logs.find((l) => l.event === 'catalogue_invalid')).toMatchObject({
        problems: ['cargo entry 1, match: may hold one * at most (temp*, *_temp, reefer*_temp)'],
      });
      expect(await cargoOf(name)).toHaveLength(2);

      // An empty catalogue is a version of its own: the dashboards show ids as they are again.
      writeFileSync(file, '# nothing named\n');
      gw.child.kill('SIGHUP');
      await waitUntil('the emptied catalogue', async () => (await cargoOf(name)).length === 0, 10_000);
    } finally {
      await stop(gw, 'SIGTERM');
    }
  });
});
