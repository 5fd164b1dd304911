import type { Context } from 'hono';
import type { ClaimCheck } from '../claims/site-claims.js';
import { INSTANCE_HEADER, isInstanceId } from '../reading/site-id.js';
import { problem } from './problem-details.js';

/** What ingest and the fleet report ask of the centre's site claims (claims/site-claims.ts). */
export interface ClaimChecker {
  check(site: string, instance: string, gateway?: string): ClaimCheck;
}

const INSTANCE_LOC = ['header', INSTANCE_HEADER];

/**
 * The refusal of a request whose gateway instance (`X-Harbor-Instance`) may not forward under
 * `site`: another instance claimed the site first (409 `site_claimed`: the sending gateway holds
 * its readings and says why), or the header is no instance id (400). Undefined: go on.
 */
export function siteClaimRefusal(c: Context, claims: ClaimChecker, site: string, instance: string, gateway?: string): Response | undefined {
  if (!isInstanceId(instance)) {
    return problem(c, 400, `${INSTANCE_HEADER} is not an instance id`, [
      { loc: INSTANCE_LOC, msg: 'An instance id: 1-64 lower-case letters, digits and inner hyphens', type: 'instance_invalid' },
    ]);
  }
  const decision = claims.check(site, instance, gateway);
  if (decision.ok) return undefined;
  const { owner } = decision;
  const who = `instance ${owner.instance}${owner.gateway === null ? '' : ` (gateway ${JSON.stringify(owner.gateway)})`}`;
  return problem(
    c,
    409,
    `Site ${JSON.stringify(site)} belongs to another gateway: ${who} forwards under it since ${new Date(owner.firstMs).toISOString()}. ` +
      `Two gateways have one site id: give this one its own SITE_ID, or release the claim at the centre (harbor-gateway site-claims release ${JSON.stringify(site)})`,
    [{ loc: INSTANCE_LOC, msg: `Site ${JSON.stringify(site)} is claimed by ${who}`, type: 'site_claimed' }],
  );
}
