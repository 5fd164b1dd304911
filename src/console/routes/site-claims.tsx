import type { Context, Hono } from 'hono';
import type { GatewayConsole } from '../gateway-console.js';
import { Confirm } from '../pages/confirm.js';
import { CONSOLE_PATH } from '../pages/layout.js';
import { peerAddress } from '../request-facts.js';
import { flash, renderPage, sessionFrame } from '../render.js';
import { requireFormToken } from './guard.js';

/** At a centre: releasing a site's claim, so the next gateway that forwards under it owns it (claims/site-claims.ts). */
export function registerSiteClaimRoutes(app: Hono, console: GatewayConsole): void {
  const frame = (c: Context) => sessionFrame(c, console.deps.version, 'overview', 'Release a site claim', {});

  app.post(`${CONSOLE_PATH}/site-claims/release`, requireFormToken(), async (c) => {
    const body = await c.req.parseBody();
    const site = typeof body['site'] === 'string' ? body['site'] : '';
    const release = console.deps.releaseSiteClaim;
    const owner = console.deps.siteClaims?.().conflicts.find((conflict) => conflict.site === site)?.owner;
    if (release === undefined || site === '') return c.redirect(CONSOLE_PATH, 303);
    if (body['confirm'] !== 'yes') {
      return renderPage(
        c,
        frame(c),
        <Confirm
          question={`Release the claim of site ${JSON.stringify(site)}?`}
          detail={
            `${owner === undefined ? 'Its owner' : `Instance ${owner.instance}${owner.gateway === null ? '' : ` (${owner.gateway})`}`} ` +
            'loses the site: the next gateway that forwards under it owns it, and its readings are stored from then on. ' +
            'Rename or stop the gateway that should not have the site first, or the two take turns.'
          }
          action={`${CONSOLE_PATH}/site-claims/release`}
          fields={[['site', site]]}
          confirmLabel="Release the claim"
          cancelHref={CONSOLE_PATH}
          csrf={c.get('consoleSession').csrf}
        />,
      );
    }
    const released = release(site);
    if (released !== undefined) {
      console.deps.audit.record({
        action: 'site_claim_released',
        outcome: 'ok',
        actor: 'console',
        origin: peerAddress(c),
        subject: site,
        detail: `from instance ${released.instance}${released.gateway === null ? '' : ` (${released.gateway})`}`,
      });
    }
    if (released !== undefined)
      flash(c, 'overview', `The claim of site ${JSON.stringify(site)} was released: the next gateway that forwards under it owns it.`);
    return c.redirect(CONSOLE_PATH, 303);
  });
}
