import type { FC } from 'hono/jsx';
import type { AuditEntry, AuditOutcome } from '../../audit/audit-entry.js';
import { formatAgo, formatCount, formatTime } from './format.js';
import { Section } from './layout.js';

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
  site_claim_released: 'Site claim released',
  update_uploaded: 'Update uploaded',
  rollback_requested: 'Going back asked',
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

/** One entry: what, its outcome and when on the first line; about what, by whom and how on the second. */
const Entry: FC<{ entry: AuditEntry; now: number }> = ({ entry, now }) => (
  <li>
    <p class="trail-head">
      <strong>{ACTIONS[entry.action] ?? entry.action}</strong> <span class={BADGE[entry.outcome] ?? 'badge'}>{entry.outcome}</span>{' '}
      {entry.count > 1 ? (
        <span>
          {formatCount(entry.count)} times from {formatTime(entry.firstMs)} to{' '}
        </span>
      ) : null}
      <time datetime={new Date(entry.atMs).toISOString()}>{formatTime(entry.atMs)}</time>{' '}
      <span class="muted">({formatAgo(entry.atMs, now)})</span>
    </p>
    <p class="trail-body">
      {entry.subject === null ? null : <span class="mono">{entry.subject}</span>}
      {entry.detail === null ? null : <span>{entry.detail}</span>}
      <span class="muted">
        by {entry.actor}
        {entry.origin === null ? null : <span class="mono"> {entry.origin}</span>}
      </span>
    </p>
  </li>
);

export const Audit: FC<AuditModel> = ({ entries, now, shown }) => (
  <Section name="audit" heading={`The latest ${formatCount(Math.min(entries.length, shown))}`}>
    {entries.length === 0 ? (
      <p class="muted" id="no-audit">
        Nothing recorded yet.
      </p>
    ) : (
      <ol class="trail" id="audit-entries" aria-label="Audit trail, newest first">
        {entries.map((entry) => (
          <Entry entry={entry} now={now} />
        ))}
      </ol>
    )}
    <p class="hint">
      Logins, key changes, dead letters re-queued or purged, updates and applied settings, from the console, the command line and the
      appliance. Refused or throttled logins from one address are counted together per minute. The trail keeps the latest 10,000 entries in
      audit.db in the data directory; harbor-gateway audit list prints it.
    </p>
  </Section>
);
