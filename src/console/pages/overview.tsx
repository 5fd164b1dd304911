import type { FC } from 'hono/jsx';
import type { GatewayState } from '../../health/gateway-state.js';
import type { GatewaySnapshot, SinkSnapshot, SiteConflictSnapshot } from '../../health/snapshot.js';
import { formatBytes, formatCount, formatDuration } from './format.js';
import { CONSOLE_PATH, CountCell, CsrfField, figures, Section, Table } from './layout.js';
import { MinuteChart } from './minute-chart.js';

export interface OverviewModel {
  state: GatewayState;
  snapshot: GatewaySnapshot;
  /** Readings accepted per minute, the last hour oldest first. */
  minutes: number[];
  /** Refused API requests since start by status, as `/metrics` counts them (`harbor_ingest_requests_total`). */
  refused: [status: number, count: number][];
  /** Where devices and browsers reach the gateway over HTTPS. */
  httpsUrls: string[];
  csrf: string;
  /** The gateway listens on this machine only (`listenHost`): no device elsewhere reaches it. */
  thisMachineOnly: boolean;
  listenHost: string;
}

/** A flush interval as it was set: whole seconds, else milliseconds. */
const interval = (ms: number): string => (ms % 1000 === 0 ? `${formatCount(ms / 1000)} s` : `${formatCount(ms)} ms`);
const age = (seconds: number | null): string => (seconds === null ? 'none' : `${formatDuration(seconds)} old`);

const CLOCK = { true: 'synchronised', false: 'not synchronised: readings without a time get an untrusted time', null: 'unknown here' };

/** "12 requests (3 × 401, 9 × 422)". */
function refusedText(refused: readonly [number, number][]): string {
  const total = refused.reduce((sum, [, n]) => sum + n, 0);
  const parts = refused.map(([status, n]) => `${formatCount(n)} × ${status}`).join(', ');
  return `${formatCount(total)} ${total === 1 ? 'request' : 'requests'}${total === 0 ? '' : ` (${parts})`}`;
}

export const Overview: FC<OverviewModel> = ({ state, snapshot: s, minutes, refused, httpsUrls, thisMachineOnly, listenHost, csrf }) => (
  <>
    <p class={`state state-${state.code}`} id="state">
      {state.text}
    </p>
    {(s.siteClaims?.conflicts.length ?? 0) === 0 ? null : <SiteConflicts conflicts={s.siteClaims!.conflicts} csrf={csrf} />}
    <Section name="rate" heading="Readings per minute">
      <MinuteChart counts={minutes} />
    </Section>
    <div class="grid2">
      <Section name="queue" heading="Queue">
        <dl class="facts">
          <dt>Readings waiting</dt>
          <dd id="queue-readings">{formatCount(s.queue.readings)}</dd>
          <dt>Size</dt>
          <dd>
            {formatBytes(s.queue.bytes)} of {formatBytes(s.queue.maxBytes)} ({Math.floor((100 * s.queue.bytes) / s.queue.maxBytes)} %)
          </dd>
          <dt>Oldest queued reading</dt>
          <dd>{age(s.queue.oldestAgeSeconds)}</dd>
          <dt>Dead letters now</dt>
          <dd id="dead-letters-now">
            <a href="/console/dead-letters">{formatCount(s.deadLetters)}</a> <span class="muted">in the queue file, every sink</span>
          </dd>
          <dt>Durability</dt>
          <dd>{s.durability}</dd>
        </dl>
      </Section>
      <Section name="gateway" heading="Gateway">
        <dl class="facts">
          <dt>Version</dt>
          <dd>{s.version}</dd>
          {s.identity === undefined ? null : (
            <>
              <dt>Site</dt>
              <dd id="site">{s.identity.site}</dd>
              <dt>Instance</dt>
              <dd class="mono" id="instance">
                {s.identity.instance}
              </dd>
            </>
          )}
          <dt>Up for</dt>
          <dd>{formatDuration(s.uptimeSeconds)}</dd>
          <dt>Clock</dt>
          <dd>{CLOCK[String(s.clockSynchronized) as keyof typeof CLOCK]}</dd>
          <dt>Accepted since start</dt>
          <dd>
            {formatCount(s.totals.acceptedReadings)} readings in {formatCount(s.totals.acceptedRequests)}
            {s.totals.acceptedRequests === 1 ? ' request' : ' requests'}
          </dd>
          <dt>API requests refused since start</dt>
          <dd id="refused-since-start">
            <a href="/console/devices#refusals">{refusedText(refused)}</a>
          </dd>
        </dl>
      </Section>
    </div>
    <Section name="sinks" heading="Destinations">
      <Table
        label="Destinations"
        columns={[
          'Sink',
          figures('Backlog'),
          'Oldest undelivered',
          figures('Delivered'),
          figures('Failures'),
          figures('Dead-lettered since start'),
          'Last error',
        ]}
      >
        {s.sinks.map((sink) => (
          <SinkRow sink={sink} />
        ))}
      </Table>
    </Section>
    <Section name="https" heading="HTTPS">
      <dl class="facts stacked">
        <dt>Addresses</dt>
        <dd id="https-addresses">
          {httpsUrls.map((url, i) => (
            <>
              {i > 0 ? <br /> : null}
              <span class="mono">{url}</span>
            </>
          ))}
          {thisMachineOnly ? (
            <span class="hint" id="this-machine-only">
              The gateway listens on {listenHost} (HOST): only this machine reaches it. Devices on the LAN need HOST=0.0.0.0 or the board's
              own address.
            </span>
          ) : null}
        </dd>
        <dt>Certificate fingerprint (SHA-256)</dt>
        <dd class="mono" id="fingerprint">
          {s.tls?.fingerprintSha256 ?? 'none'}
        </dd>
        <dt>Valid until</dt>
        <dd>{s.tls?.notAfter ?? 'unknown'}</dd>
      </dl>
    </Section>
  </>
);

/** Sites two gateways forward here under one site id: whose readings are stored, whose are refused, and the release. */
const SiteConflicts: FC<{ conflicts: readonly SiteConflictSnapshot[]; csrf: string }> = ({ conflicts, csrf }) => (
  <Section name="site-conflicts" heading="Sites forwarded by two gateways">
    <p class="error">
      Two gateways forward under one site id (a cloned card, or two sites given one name). The first to claim the site owns it: its readings
      are stored. The other's are refused, kept queued at its site, until it is renamed (SITE_ID) or the claim is released here, after which
      the next gateway that forwards under the site owns it.
    </p>
    <Table label="Sites forwarded by two gateways" columns={['Site', 'Owner', 'Refused', figures('Requests refused'), '']}>
      {conflicts.map((c) => (
        <tr>
          <th scope="row">{c.site}</th>
          <td data-label="Owner">
            {c.owner === null ? (
              <span class="muted">none</span>
            ) : (
              <>
                <span class="mono">{c.owner.instance}</span> {c.owner.gateway ?? ''}
                <span class="hint">
                  since {c.owner.since}, last heard {c.owner.lastHeard}
                </span>
              </>
            )}
          </td>
          <td data-label="Refused">
            <span class="mono">{c.claimant.instance}</span> {c.claimant.gateway ?? ''}
            <span class="hint">
              refused since {c.claimant.refusedSince}, last {c.claimant.lastRefused}
            </span>
          </td>
          <CountCell count={c.claimant.refusedRequests} label="Requests refused" />
          <td>
            <form method="post" action={`${CONSOLE_PATH}/site-claims/release`}>
              <CsrfField csrf={csrf} />
              <input type="hidden" name="site" value={c.site} />
              <button type="submit">Release the claim</button>
            </form>
          </td>
        </tr>
      ))}
    </Table>
  </Section>
);

const SinkRow: FC<{ sink: SinkSnapshot }> = ({ sink }) => (
  <tr>
    <th scope="row">
      {sink.name}
      <span class="hint">{sink.destination}</span>
      <span class="hint">sends every {interval(sink.flushIntervalMs)}</span>
      {sink.budgetBytesPerS === undefined ? null : (
        <span class="hint">
          budget {sink.budgetBytesPerS} bytes/s
          {sink.budgetCheapHours === undefined ? '' : ` (none ${sink.budgetCheapHours})`}
          {sink.catchUpSeconds === null || sink.backlog === 0 ? '' : `, backlog sent in about ${formatDuration(sink.catchUpSeconds)}`}
        </span>
      )}
    </th>
    <CountCell count={sink.backlog} label="Backlog" />
    <td data-label="Oldest undelivered">{age(sink.oldestAgeSeconds)}</td>
    <CountCell count={sink.delivered} label="Delivered" />
    <CountCell count={sink.failures} label="Failures" />
    <CountCell count={sink.deadLettered} label="Dead-lettered since start" />
    <td data-label="Last error">
      {sink.lastError === null ? (
        <span class="muted">none</span>
      ) : (
        <>
          <span class={sink.consecutiveFailures > 0 ? 'badge badge-bad' : 'badge badge-live'}>
            {sink.consecutiveFailures > 0 ? `failing (${sink.consecutiveFailures} in a row)` : 'recovered'}
          </span>{' '}
          {sink.lastError.at}: {sink.lastError.message}
        </>
      )}
    </td>
  </tr>
);
