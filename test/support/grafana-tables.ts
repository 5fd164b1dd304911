// The tables the dashboards and alert rules read, created under names of a test's own (with the
// gateway's own statements), and the provisioned SQL pointed at them: many tests share the suite's
// QuestDB, and each sees only its tables.
import { inject } from 'vitest';
import { createCatalogueTables } from '../../src/catalogue/catalogue-tables.js';
import { createFleetSinkTable, createFleetSiteTable } from '../../src/health/fleet-rows.js';
import { createEventsTable } from '../../src/health/gateway-events.js';
import { createHealthTable, createKeyHealthTable } from '../../src/health/health-reporter.js';
import { createSinkHealthTable } from '../../src/health/sink-health.js';
import { QuestDbHttp } from '../../src/questdb/questdb-http.js';
import { setUpTable } from '../../src/sinks/questdb/table-setup.js';
import { sql, uniqueTable, waitForWalApplied } from './questdb-sql.js';

export interface DashboardTables {
  readings: string;
  health: string;
  keys: string;
  sinks: string;
  events: string;
  cargoCatalogue: string;
  shipCatalogue: string;
  fleetSites: string;
  fleetSinks: string;
}

/** The name each table has in the provisioned SQL. */
const PROVISIONED: Record<keyof DashboardTables, string> = {
  readings: 'cargo_data',
  health: 'gateway_health',
  keys: 'gateway_key_health',
  sinks: 'gateway_sink_health',
  events: 'gateway_events',
  cargoCatalogue: 'cargo_catalogue',
  shipCatalogue: 'ship_catalogue',
  fleetSites: 'fleet_site_health',
  fleetSinks: 'fleet_sink_health',
};

/** Fresh names for one test's tables; nothing is created yet. */
export function dashboardTableNames(): DashboardTables {
  const names = Object.fromEntries(
    Object.keys(PROVISIONED).map((key) => [key, uniqueTable(key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`))]),
  );
  return names as unknown as DashboardTables;
}

/** Creates every table as the gateway does at its start (the readings table as its QuestDB sink does, the fleet tables empty). */
export async function createDashboardTables(tables: DashboardTables = dashboardTableNames()): Promise<DashboardTables> {
  const questdb = new QuestDbHttp({ url: inject('questdbUrl'), timeoutMs: 10_000, username: undefined, password: undefined });
  try {
    await setUpTable(questdb, tables.readings, undefined);
  } finally {
    await questdb.close();
  }
  await sql(createHealthTable(tables.health));
  await sql(createKeyHealthTable(tables.keys));
  await sql(createSinkHealthTable(tables.sinks));
  await sql(createEventsTable(tables.events));
  for (const statement of createCatalogueTables({ cargo: tables.cargoCatalogue, ships: tables.shipCatalogue })) await sql(statement);
  await sql(createFleetSiteTable(tables.fleetSites));
  await sql(createFleetSinkTable(tables.fleetSinks));
  return tables;
}

/** Waits until QuestDB applied every write to the tables. */
export async function waitForTables(tables: DashboardTables): Promise<void> {
  for (const table of Object.values(tables)) await waitForWalApplied(table);
}

/** The provisioned SQL reading the test's tables instead of the provisioned names. */
export function renameTables(text: string, tables: DashboardTables): string {
  let renamed = text;
  for (const [key, name] of Object.entries(PROVISIONED))
    renamed = renamed.replace(new RegExp(`\\b${name}\\b`, 'g'), tables[key as keyof DashboardTables]);
  return renamed;
}
