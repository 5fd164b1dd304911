import type { ReadingIssue } from '../reading/reading-issues.js';
import { decodeSite } from '../reading/site-id.js';
import type { Principal } from './key-store.js';

const SITE_LOC = ['header', 'x-harbor-site'];

export type SiteOfRequest =
  /** The site to store the readings under; undefined: the gateway's own. */
  { ok: true; site: string | undefined } | { ok: false; status: 400 | 403; message: string; details: ReadingIssue[] };

/**
 * The site a request's readings come from: the one its `X-Harbor-Site` header names (a site
 * gateway forwarding), else the site its key is bound to, else this gateway's own. A key bound to
 * a site writes as that site only, so one site cannot write as another.
 */
export function siteOfRequest(principal: Principal | undefined, header: string | undefined, ownSite: string): SiteOfRequest {
  const bound = principal?.site;
  let site = bound;
  if (header !== undefined) {
    const named = decodeSite(header);
    if (named === undefined) {
      return {
        ok: false,
        status: 400,
        message: 'X-Harbor-Site is not a site id',
        details: [{ loc: SITE_LOC, msg: 'A site id: 1-128 characters without control characters, percent-encoded', type: 'site_invalid' }],
      };
    }
    if (bound !== undefined && named !== bound) {
      return {
        ok: false,
        status: 403,
        message: `The key ${principal!.name} may only write as site ${JSON.stringify(bound)}`,
        details: [
          { loc: SITE_LOC, msg: `Site ${JSON.stringify(named)} is not allowed for the key ${principal!.name}`, type: 'site_not_allowed' },
        ],
      };
    }
    site = named;
  }
  return { ok: true, site: site === ownSite ? undefined : site };
}
