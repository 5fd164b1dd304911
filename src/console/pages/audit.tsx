import type { FC } from 'hono/jsx';
import type { AuditEntry, AuditOutcome } from '../../audit/audit-entry.js';
import { formatAgo, formatCount, formatTime } from './format.js';
import { Section, Table } from './layout.js';

export interface AuditModel {
  entries: AuditEntry[];
  now: number;
  /** How many the page lists at most. */
  shown: number;
}

/** What each action is, in the words of the page. */
const ACTIONS: Record<AuditEntry['action'], string> = {
  login: 'Console login',
  logout: 'Console logout',
  key_added: 'Key added',
  key_revoked: 'Key revoked',
  dead_letters_requeued: 'Dead letters re-queued',
  dead_letters_purged: 'Dead letters purged',
  update_uploaded: 'Update uploaded',
  update_installed: 'Update installed',
  update_confirmed: 'Update confirmed',
  update_rolled_back: 'Update rolled back',
  settings_applied: 'Settings applied',
};

const BADGE: Record<AuditOutcome, string> = {
  ok: 'badge badge-live',
  refused: 'badge badge-bad',
  throttled: 'badge badge-stale',
  failed: 'badge badge-bad',
};

const When: FC<{ entry: AuditEntry; now: number }> = ({ entry, now }) => (
  <>
    <time datetime={new Date(entry.atMs).toISOString()}>{formatTime(entry.atMs)}</time>{' '}
    <span class="muted">({formatAgo(entry.atMs, now)})</span>
  </>
);

export const Audit: FC<AuditModel> = ({ entries, now, shown }) => (
  <Section name="audit" heading={`The latest ${formatCount(Math.min(entries.length, shown))}`}>
    {entries.length === 0 ? (
      <p class="muted" id="no-audit">
        Nothing recorded yet.
      </p>
    ) : (
      <Table label="Audit trail" id="audit-entries" columns={['When', 'What', 'Outcome', 'Who', 'Subject', 'Detail']}>
        {entries.map((entry) => (
          <tr>
            <td>
              <When entry={entry} now={now} />
            </td>
            <th scope="row">{ACTIONS[entry.action] ?? entry.action}</th>
            <td>
              <span class={BADGE[entry.outcome] ?? 'badge'}>{entry.outcome}</span>
              {entry.count > 1 ? (
                <span class="muted">
                  {' '}
                  {formatCount(entry.count)} times since {formatTime(entry.firstMs)}
                </span>
              ) : null}
            </td>
            <td>
              {entry.actor}
              {entry.origin === null ? null : <span class="mono"> {entry.origin}</span>}
            </td>
            <td class="mono">{entry.subject ?? ''}</td>
            <td>{entry.detail ?? ''}</td>
          </tr>
        ))}
      </Table>
    )}
    <p class="hint">
      Logins, key changes, dead letters re-queued or purged, updates and applied settings, from the console, the command line and the
      appliance. Refused or held logins from one address are counted together per minute. The trail keeps the latest 10,000 entries in
      audit.db in the data directory; harbor-gateway audit list prints it.
    </p>
  </Section>
);
