import type { Context, Hono } from 'hono';
import { describeSelection } from '../../audit/audit-entry.js';
import { DeadLetterStore, INGEST_SOURCES, type Selection } from '../../queue/dead-letters.js';
import { peerAddress } from '../request-facts.js';
import type { GatewayConsole } from '../gateway-console.js';
import { Confirm } from '../pages/confirm.js';
import { DeadLetters } from '../pages/dead-letters.js';
import { formatCount } from '../pages/format.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { flash, renderPage, sessionFrame } from '../render.js';
import { requireFormToken } from './guard.js';

/** Dead letters listed on the page, oldest first. */
const LISTED = 200;
/** Dead letters the summary by sink and reason reads at most. */
const SUMMARISED = 1000;

/** The ids a form selected (`id` once per checked box), or 'all'. */
function selectionOf(body: Record<string, unknown>, all: boolean): Selection {
  if (all) return { ids: 'all' };
  const raw = body['id'];
  const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
  return { ids: values.filter((v): v is string => typeof v === 'string' && /^\d{1,15}$/.test(v)).map(Number) };
}

const describe = (selection: Selection, total: number): string =>
  selection.ids === 'all'
    ? `all ${formatCount(total)} dead letters`
    : `${selection.ids.length} dead ${selection.ids.length === 1 ? 'letter' : 'letters'}`;

const describeCount = (n: number): string => `${formatCount(n)} dead ${n === 1 ? 'letter' : 'letters'}`;

/** What a re-queue did, sink by sink: a letter goes again to the one destination that refused it, one refused at ingest to every one. */
function requeuedNotice(bySink: ReadonlyMap<string, number>): string {
  const count = [...bySink.values()].reduce((sum, n) => sum + n, 0);
  if (count === 0) return 'Nothing was re-queued: the selected dead letters were gone already.';
  const where = [...bySink]
    .map(([sink, n]) => (INGEST_SOURCES.has(sink) ? `${formatCount(n)} from ${sink} to every destination` : `${formatCount(n)} to ${sink}`))
    .join(', ');
  return `Re-queued ${describeCount(count)} (${where}), sent at the next delivery.`;
}

/** The same store the `dead-letters` command uses, opened for one request and closed after it. */
function withStore<T>(console: GatewayConsole, use: (store: DeadLetterStore) => T): T {
  const store = new DeadLetterStore(console.deps.queue.dataDir);
  try {
    return use(store);
  } finally {
    store.close();
  }
}

export function registerDeadLetterRoutes(app: Hono, console: GatewayConsole): void {
  const audit = (c: Context, action: 'dead_letters_requeued' | 'dead_letters_purged', selection: Selection, detail: string) =>
    console.deps.audit.record({
      action,
      outcome: 'ok',
      actor: 'console',
      origin: peerAddress(c),
      subject: describeSelection(selection.ids),
      detail,
    });
  const frame = (c: Context, notice?: string) => sessionFrame(c, console.deps.version, 'dead-letters', 'Dead letters', { notice });

  app.get(`${CONSOLE_PATH}/dead-letters`, (c) => {
    const model = withStore(console, (store) => {
      const total = store.count();
      const groups = new Map<string, { sink: string; reason: string; count: number }>();
      for (const letter of store.list(SUMMARISED)) {
        const id = `${letter.sink}\0${letter.reason}`;
        const group = groups.get(id) ?? { sink: letter.sink, reason: letter.reason, count: 0 };
        group.count += 1;
        groups.set(id, group);
      }
      return { total, letters: store.list(LISTED), bySink: [...groups.values()].sort((a, b) => b.count - a.count) };
    });
    return renderPage(
      c,
      frame(c),
      <DeadLetters {...model} summarised={model.total > SUMMARISED ? SUMMARISED : undefined} csrf={c.get('consoleSession').csrf} />,
    );
  });

  app.post(`${CONSOLE_PATH}/dead-letters`, requireFormToken(), async (c) => {
    const body = await c.req.parseBody({ all: true });
    const action = body['action'];
    const selection = selectionOf(body, action === 'requeue-all' || action === 'purge-all');
    if (selection.ids !== 'all' && selection.ids.length === 0) {
      return c.redirect(`${CONSOLE_PATH}/dead-letters`, 303);
    }
    if (action === 'requeue' || action === 'requeue-all') {
      const bySink = withStore(console, (store) => store.requeue(selection));
      const count = [...bySink.values()].reduce((sum, n) => sum + n, 0);
      const where = [...bySink].map(([name, n]) => `${n} to ${name}`).join(', ');
      audit(c, 'dead_letters_requeued', selection, `${count} re-queued${where === '' ? '' : ` (${where})`}`);
      // The queue's totals and the sinks learn of the re-queued readings now, not at the next housekeeping.
      console.deps.queue.refresh();
      console.deps.delivery.notifyAppended();
      flash(c, 'dead-letters', requeuedNotice(bySink));
      return c.redirect(`${CONSOLE_PATH}/dead-letters`, 303);
    }
    if (action !== 'purge' && action !== 'purge-all') return c.text('Unknown action', 400);
    const total = withStore(console, (store) => store.count());
    return renderPage(
      c,
      frame(c),
      <Confirm
        question={`Purge ${describe(selection, total)}?`}
        detail="Their readings are deleted for good and reach no destination. This cannot be undone. (Re-queue sends them again instead.)"
        action={`${CONSOLE_PATH}/dead-letters/purge`}
        fields={selection.ids === 'all' ? [['all', 'yes']] : selection.ids.map((id) => ['id', String(id)] as [string, string])}
        confirmLabel="Purge for good"
        cancelHref={`${CONSOLE_PATH}/dead-letters`}
        csrf={c.get('consoleSession').csrf}
      />,
    );
  });

  app.post(`${CONSOLE_PATH}/dead-letters/purge`, requireFormToken(), async (c) => {
    const body = await c.req.parseBody({ all: true });
    if (body['confirm'] !== 'yes') return c.redirect(`${CONSOLE_PATH}/dead-letters`, 303);
    const selection = selectionOf(body, body['all'] === 'yes');
    const count = selection.ids !== 'all' && selection.ids.length === 0 ? 0 : withStore(console, (store) => store.purge(selection));
    audit(c, 'dead_letters_purged', selection, `${count} purged`);
    flash(c, 'dead-letters', `Purged ${describeCount(count)} for good.`);
    return c.redirect(`${CONSOLE_PATH}/dead-letters`, 303);
  });
}
