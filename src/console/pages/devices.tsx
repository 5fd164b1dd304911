import type { FC } from 'hono/jsx';
import type { KeyRefusals, WrongKeyAddress } from '../activity/refusal-table.js';
import type { ShipView } from '../activity/ship-table.js';
import { formatAgo, formatTime, formatValue } from './format.js';
import { CountCell, figures, Section, Table } from './layout.js';

export interface DevicesModel {
  ships: ShipView[];
  refusals: KeyRefusals[];
  wrongKeys: WrongKeyAddress[];
  /** Ships the table had to forget to stay bounded are not listed: say so when it is full. */
  shipsFull: boolean;
  now: number;
}

const Seen: FC<{ ms: number; now: number }> = ({ ms, now }) => <time datetime={new Date(ms).toISOString()}>{formatAgo(ms, now)}</time>;

export const Devices: FC<DevicesModel> = ({ ships, refusals, wrongKeys, shipsFull, now }) => (
  <>
    <Section name="ships" heading="Ships seen since the gateway started">
      {ships.length === 0 ? (
        <p class="muted">No readings accepted yet.</p>
      ) : (
        <Table label="Ships" id="ships" columns={['Ship', 'Key', 'Last seen', figures('Readings, last hour'), 'Last values']}>
          {ships.map((ship) => (
            <tr>
              <th scope="row" class="mono">
                {ship.shipId}
              </th>
              <td>{ship.key}</td>
              <td>
                <Seen ms={ship.lastSeenMs} now={now} />{' '}
                {ship.stale ? <span class="badge badge-stale">stale</span> : <span class="badge badge-live">live</span>}
              </td>
              <CountCell count={ship.readingsLastHour} />
              <td class="mono">{ship.lastValues.map((v) => `${v.cargoId}=${formatValue(v.value)}`).join('  ')}</td>
            </tr>
          ))}
        </Table>
      )}
      <p class="hint">
        A ship is stale when it has been silent for three of its usual gaps between readings, and at least 5 minutes.
        {shipsFull ? ' The table holds the 1,000 ships seen most recently.' : ''}
      </p>
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
              <CountCell count={r.forbidden} />
              <CountCell count={r.invalid} />
              <CountCell count={r.other} />
              <td>
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
              <CountCell count={w.wrong} />
              <CountCell count={w.missing} />
              <td>
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
