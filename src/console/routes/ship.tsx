import type { Hono } from 'hono';
import { cargoEntryFor } from '../../catalogue/catalogue.js';
import { DEFAULT_SPAN, SPANS, type SpanHours } from '../cargo-history.js';
import type { GatewayConsole } from '../gateway-console.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { type CargoLabel, Ship } from '../pages/ship.js';
import { renderPage, sessionFrame } from '../render.js';

/** Seconds between refreshes of a ship's page: each asks QuestDB once. */
const REFRESH_S = 30;
/** Longest ship id the page takes: the gateway's own bound on ids is at most this. */
const MAX_ID = 1024;

const spanOf = (query: string | undefined): SpanHours => {
  const hours = Number(query);
  return hours in SPANS ? (hours as SpanHours) : DEFAULT_SPAN;
};

/** `GET /console/devices/<ship id>`: the ship's latest values and its cargo over the last hours, charted from QuestDB. */
export function registerShipRoute(app: Hono, console: GatewayConsole): void {
  app.get(`${CONSOLE_PATH}/devices/:ship`, async (c) => {
    const shipId = c.req.param('ship');
    if (shipId.length === 0 || shipId.length > MAX_ID || /[\p{Cc}]/u.test(shipId)) return c.text('No such ship id', 404);
    const now = Date.now();
    const span = spanOf(c.req.query('hours'));
    const catalogue = console.deps.catalogue.catalogue;
    const seen = console.ships.get(shipId, now);
    const history = await console.history.read(shipId, span, now);
    const ids = new Set([...(seen?.lastValues.map((v) => v.cargoId) ?? []), ...(history.kind === 'ok' ? history.byCargo.keys() : [])]);
    const cargo: CargoLabel[] = [...ids]
      .map((cargoId) => {
        const entry = cargoEntryFor(catalogue, cargoId);
        // A pattern names many ids: its matches show as "name (id)", as on the dashboards.
        const name = entry?.name === undefined ? cargoId : entry.match.includes('*') ? `${entry.name} (${cargoId})` : entry.name;
        return { cargoId, name, entry };
      })
      .sort((a, b) => a.name.localeCompare(b.name));
    const questdbSink = console.snapshot(now).sinks.find((s) => s.name === 'questdb');
    const model = {
      shipId,
      name: catalogue.ships.get(shipId),
      seen,
      history,
      span,
      cargo,
      questdbBacklog: questdbSink?.backlog,
      now,
    };
    const title = `Ship ${model.name ?? shipId}`;
    return renderPage(c, sessionFrame(c, console.deps.version, 'devices', title, { refreshS: REFRESH_S }), <Ship {...model} />);
  });
}
