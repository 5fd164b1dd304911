import type { FC } from 'hono/jsx';
import type { KeyRefusals, WrongKeyAddress } from '../activity/refusal-table.js';
import { MAX_SHIPS, RECENT_MS, type ShipTableFacts, type ShipView } from '../activity/ship-table.js';
import { formatAgo, formatCount, formatTime, formatValue } from './format.js';
import { CountCell, figures, Section, Table } from './layout.js';

export interface DevicesModel {
  /** The ships listed, each with its name in the site's catalogue when it has one. */
  ships: (ShipView & { name: string | undefined })[];
  table: ShipTableFacts;
  refusals: KeyRefusals[];
  wrongKeys: WrongKeyAddress[];
  now: number;
}

const Seen: FC<{ ms: number; now: number }> = ({ ms, now }) => <time datetime={new Date(ms).toISOString()}>{formatAgo(ms, now)}</time>;

/** The ship's own page: its cargo over the last hours. */
export const shipHref = (shipId: string): string => `/console/devices/${encodeURIComponent(shipId)}`;

/** "Readings, last hour", or since the start when this process has not counted an hour yet. */
const readingsHeading = (table: ShipTableFacts, now: number): string =>
  now - table.countingSinceMs < RECENT_MS ? `Readings since the start ${formatAgo(table.countingSinceMs, now)}` : 'Readings, last hour';

/** What the table holds and what it did not list, in one heading. */
function shipsHeading(table: ShipTableFacts): string {
  const listed = `${formatCount(table.ships)} ${table.ships === 1 ? 'ship' : 'ships'}`;
  const left: string[] = [];
  if (table.forgotten > 0) left.push(`${formatCount(table.forgotten)} forgotten`);
  if (table.leftOutReadings > 0)
    left.push(`${formatCount(table.leftOutReadings)} ${table.leftOutReadings === 1 ? 'reading' : 'readings'} of unlisted ships`);
  return `Ships seen since ${formatTime(table.sinceMs)}: ${listed} listed, ${left.length === 0 ? 'none left out' : left.join(', ')}`;
}

const LeftOut: FC<{ table: ShipTableFacts }> = ({ table }) => (
  <p class="hint" id="ships-left-out">
    The table keeps up to {formatCount(MAX_SHIPS)} ships, across restarts.{' '}
    {table.forgotten === 0 && table.leftOutReadings === 0 ? 'Every ship that sent since then is listed.' : null}
    {table.forgotten === 0
      ? null
      : `It let ${formatCount(table.forgotten)} go to make room: each silent for over an hour and not in the catalogue. `}
    {table.leftOutReadings === 0 ? null : (
      <>
        It did not list the ships of {formatCount(table.leftOutReadings)} {table.leftOutReadings === 1 ? 'reading' : 'readings'} (accepted
        and queued as any other) while every listed ship was live or in the catalogue; the latest:{' '}
        <span class="mono">{table.leftOutShips.join(', ')}</span>.
      </>
    )}
  </p>
);

export const Devices: FC<DevicesModel> = ({ ships, table, refusals, wrongKeys, now }) => {
  const readings = readingsHeading(table, now);
  return (
    <>
      <Section name="ships" heading={shipsHeading(table)}>
        {ships.length === 0 ? (
          <p class="muted">No readings accepted yet.</p>
        ) : (
          <Table label="Ships" id="ships" columns={['Ship', 'Key', 'Last seen', figures(readings), 'Last values']}>
            {ships.map((ship) => (
              <tr>
                <th scope="row">
                  <a href={shipHref(ship.shipId)} class="mono">
                    {ship.shipId}
                  </a>
                  {ship.name === undefined ? null : <span class="hint">{ship.name}</span>}
                </th>
                <td data-label="Key">{ship.key}</td>
                <td data-label="Last seen">
                  <Seen ms={ship.lastSeenMs} now={now} />{' '}
                  {ship.stale ? <span class="badge badge-stale">stale</span> : <span class="badge badge-live">live</span>}
                </td>
                <CountCell count={ship.readingsLastHour} label={readings} />
                <td class="mono" data-label="Last values">
                  {ship.lastValues.map((v) => `${v.cargoId}=${formatValue(v.value)}`).join('  ')}
                </td>
              </tr>
            ))}
          </Table>
        )}
        <LeftOut table={table} />
        <p class="hint">A ship is stale when it has been silent for three of its usual gaps between readings, and at least 5 minutes.</p>
      </Section>
      <Section name="refusals" heading="Refusals by key" id="refusals">
        {refusals.length === 0 ? (
          <p class="muted">No request with a valid key was refused.</p>
        ) : (
          <Table
            label="Refusals by key"
            id="key-refusals"
            columns={['Key', figures('403 ship not allowed'), figures('422 invalid readings'), figures('Other'), 'Latest']}
          >
            {refusals.map((r) => (
              <tr>
                <th scope="row">{r.key}</th>
                <CountCell count={r.forbidden} label="403 ship not allowed" />
                <CountCell count={r.invalid} label="422 invalid readings" />
                <CountCell count={r.other} label="Other" />
                <td data-label="Latest">
                  {r.last === undefined ? null : (
                    <>
                      <Seen ms={r.last.atMs} now={now} />, {r.last.status}: {r.last.message}
                    </>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        )}
        <h2 id="h-wrong">Wrong or missing keys by address</h2>
        {wrongKeys.length === 0 ? (
          <p class="muted">No request came with a wrong or missing key.</p>
        ) : (
          <Table label="Wrong keys by address" id="wrong-keys" columns={['Address', figures('Wrong key'), figures('No key'), 'Last at']}>
            {wrongKeys.map((w) => (
              <tr>
                <th scope="row" class="mono">
                  {w.address}
                </th>
                <CountCell count={w.wrong} label="Wrong key" />
                <CountCell count={w.missing} label="No key" />
                <td data-label="Last at">
                  <Seen ms={w.lastMs} now={now} /> <span class="muted">({formatTime(w.lastMs)})</span>
                </td>
              </tr>
            ))}
          </Table>
        )}
        <p class="hint">Answers to wrong keys are slowed down per address; requests with a valid key never are.</p>
      </Section>
    </>
  );
};
