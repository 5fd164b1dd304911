import type { FC } from 'hono/jsx';
import type { KeyRefusals, WrongKeyAddress } from '../activity/refusal-table.js';
import type { ShipView } from '../activity/ship-table.js';
import { formatAgo, formatCount, formatTime, formatValue } from './format.js';
import { Scroll } from './layout.js';

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
    <section aria-labelledby="h-ships">
      <h2 id="h-ships">Ships seen since the gateway started</h2>
      {ships.length === 0 ? (
        <p class="muted">No readings accepted yet.</p>
      ) : (
        <Scroll label="Ships">
          <table id="ships">
            <thead>
              <tr>
                <th scope="col">Ship</th>
                <th scope="col">Key</th>
                <th scope="col">Last seen</th>
                <th scope="col" class="num">
                  Readings, last hour
                </th>
                <th scope="col">Last values</th>
              </tr>
            </thead>
            <tbody>
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
                  <td class="num">{formatCount(ship.readingsLastHour)}</td>
                  <td class="mono">{ship.lastValues.map((v) => `${v.cargoId}=${formatValue(v.value)}`).join('  ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <p class="hint">
        A ship is stale when it has been silent for three of its usual gaps between readings, and at least 5 minutes.
        {shipsFull ? ' The table holds the 1,000 ships seen most recently.' : ''}
      </p>
    </section>
    <section aria-labelledby="h-refusals" id="refusals">
      <h2 id="h-refusals">Refusals by key</h2>
      {refusals.length === 0 ? (
        <p class="muted">No request with a valid key was refused.</p>
      ) : (
        <Scroll label="Refusals by key">
          <table id="key-refusals">
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col" class="num">
                  403 ship not allowed
                </th>
                <th scope="col" class="num">
                  422 invalid readings
                </th>
                <th scope="col" class="num">
                  Other
                </th>
                <th scope="col">Latest</th>
              </tr>
            </thead>
            <tbody>
              {refusals.map((r) => (
                <tr>
                  <th scope="row">{r.key}</th>
                  <td class="num">{formatCount(r.forbidden)}</td>
                  <td class="num">{formatCount(r.invalid)}</td>
                  <td class="num">{formatCount(r.other)}</td>
                  <td>
                    {r.last === undefined ? null : (
                      <>
                        <Seen ms={r.last.atMs} now={now} />, {r.last.status}: {r.last.message}
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <h2 id="h-wrong">Wrong or missing keys by address</h2>
      {wrongKeys.length === 0 ? (
        <p class="muted">No request came with a wrong or missing key.</p>
      ) : (
        <Scroll label="Wrong keys by address">
          <table id="wrong-keys">
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col" class="num">
                  Wrong key
                </th>
                <th scope="col" class="num">
                  No key
                </th>
                <th scope="col">Last at</th>
              </tr>
            </thead>
            <tbody>
              {wrongKeys.map((w) => (
                <tr>
                  <th scope="row" class="mono">
                    {w.address}
                  </th>
                  <td class="num">{formatCount(w.wrong)}</td>
                  <td class="num">{formatCount(w.missing)}</td>
                  <td>
                    <Seen ms={w.lastMs} now={now} /> <span class="muted">({formatTime(w.lastMs)})</span>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <p class="hint">Answers to wrong keys are slowed down per address; requests with a valid key never are.</p>
    </section>
  </>
);
