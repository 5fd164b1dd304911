import type { Hono } from 'hono';
import type { GatewayConsole } from '../gateway-console.js';
import { Confirm } from '../pages/confirm.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { renderPage, sessionFrame } from '../render.js';
import { peerAddress } from '../request-facts.js';
import { requireFormToken } from './guard.js';

/**
 * `POST /console/update/rollback`: back to the previous release the appliance keeps in its other
 * slot, after a confirmation; the board restarts into it on trial. 404 where there is no updater.
 */
export function registerRollbackRoute(app: Hono, console: GatewayConsole): void {
  app.post(`${CONSOLE_PATH}/update/rollback`, requireFormToken(), async (c) => {
    const installer = console.updateInstaller();
    if (installer === undefined) return c.text('This system has no release to go back to.', 404);
    const body = await c.req.parseBody();
    const to = typeof body['to'] === 'string' ? body['to'] : '';
    const frame = sessionFrame(c, console.deps.version, 'settings', 'Go back to the previous release');
    const message = (text: string, ok: boolean, status: 200 | 409 | 422) =>
      renderPage(
        c,
        frame,
        <p class={ok ? 'notice' : 'error'} role="status">
          {text}
        </p>,
        status,
      );
    const audit = (ok: boolean, detail: string) =>
      console.deps.audit.record({
        action: 'rollback_requested',
        outcome: ok ? 'ok' : 'refused',
        actor: 'console',
        origin: peerAddress(c),
        subject: to,
        detail,
      });
    const previous = installer.releases()?.previous;
    if (previous?.version !== to || to === '') {
      audit(false, previous === undefined || previous === null ? 'no previous release' : `the previous release is now ${previous.version}`);
      return message(
        previous === undefined || previous === null
          ? 'The board has no previous release to go back to now. Reload the settings page.'
          : `The previous release is now ${previous.version}, not ${to}. Reload the settings page.`,
        false,
        409,
      );
    }
    if (body['confirm'] !== 'yes')
      return renderPage(
        c,
        frame,
        <Confirm
          question={`Go back to ${to}?`}
          detail={`The gateway stops taking readings for a few minutes while the board restarts into ${to} (slot ${previous.slot}). It keeps ${to} once its gateway is ready, as after an update, and otherwise returns to the release it runs now. Readings already queued are delivered by ${to}.`}
          action={`${CONSOLE_PATH}/update/rollback`}
          fields={[['to', to]]}
          confirmLabel={`Go back to ${to}`}
          cancelHref={`${CONSOLE_PATH}/settings#update`}
          csrf={c.get('consoleSession').csrf}
        />,
      );
    const outcome = await installer.rollBack(to);
    audit(outcome.ok, outcome.message);
    return message(outcome.message, outcome.ok, outcome.ok ? 200 : 422);
  });
}
