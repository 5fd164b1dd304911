/** Where the site id came from: set, or fallen back to the gateway's name or the host name. */
export type SiteIdSource = 'SITE_ID' | 'GATEWAY_NAME' | 'host name';

export interface SiteName {
  name: string;
  source: SiteIdSource;
}

/**
 * Host names many machines share: what a distribution or board image sets, and what an example
 * configuration ships. Two sites forwarding under one would be stored as one site at the centre.
 */
const GENERIC_NAMES = new Set([
  'localhost',
  'localhost.localdomain',
  'raspberrypi',
  'raspberry',
  'raspbian',
  'pi',
  'ubuntu',
  'debian',
  'dietpi',
  'armbian',
  'orangepi',
  'bananapi',
  'rockpi',
  'rock64',
  'radxa',
  'odroid',
  'pine64',
  'nanopi',
  'jetson',
  'alarm',
  'alarmpi',
  'archlinux',
  'alpine',
  'fedora',
  'centos',
  'rocky',
  'almalinux',
  'kali',
  'openwrt',
  'host',
  'server',
  'gateway',
  'harbor-gateway',
]);

/** A container's generated host name (its id's first 12 hex digits), made anew with the container. */
const CONTAINER_ID = /^[0-9a-f]{12}$/;

/** The site id: `SITE_ID`, else the gateway's name, else the host name, trimmed, without control characters, at most 128 characters. */
export function siteNameOf(siteId: string | undefined, gatewayName: string | undefined, hostName: string): SiteName {
  if (siteId !== undefined) return { name: siteId, source: 'SITE_ID' };
  const fallback = gatewayName === undefined ? undefined : asSiteId(gatewayName);
  return fallback === undefined
    ? { name: asSiteId(hostName) ?? hostName, source: 'host name' }
    : { name: fallback, source: 'GATEWAY_NAME' };
}

function asSiteId(name: string): string | undefined {
  const cleaned = [...name.replace(/\p{Cc}/gu, '').trim()].slice(0, 128).join('').trim();
  return cleaned === '' ? undefined : cleaned;
}

const fellBackTo = (site: SiteName): string =>
  site.source === 'GATEWAY_NAME' ? `the gateway's name (GATEWAY_NAME) "${site.name}"` : `the host name "${site.name}"`;

/**
 * Why a gateway that forwards may not run under this site id, or undefined: a fallen-back name that
 * many machines share, or that a container makes anew. An explicit `SITE_ID` is the operator's word.
 */
export function forwardingSiteRefusal(site: SiteName): string | undefined {
  if (site.source === 'SITE_ID') return undefined;
  const lower = site.name.toLowerCase();
  const why = GENERIC_NAMES.has(lower)
    ? 'a name many machines share'
    : CONTAINER_ID.test(lower)
      ? "a container's generated name, made anew with the container"
      : undefined;
  if (why === undefined) return undefined;
  return (
    `SITE_ID is not set and the site id falls back to ${fellBackTo(site)}, ${why}: set SITE_ID to this site's own name ` +
    'before forwarding (UPSTREAM_URL, KAFKA_BROKERS, REMOTE_QUESTDB_URL), or the centre stores other sites of that name as this one'
  );
}

/** What a gateway that forwards says of a site id it fell back to; undefined for an explicit `SITE_ID`. */
export function siteFallbackNotice(site: SiteName): string | undefined {
  if (site.source === 'SITE_ID') return undefined;
  return (
    `SITE_ID is not set: this site forwards its readings as ${fellBackTo(site)}. Set SITE_ID to fix the name: ` +
    'readings answered after a change of name reach the centre under the new one'
  );
}
