/**
 * A site id names the site a reading comes from: a central gateway stores it with each reading
 * beside ship_id (ship ids repeat from site to site), so it follows the ids' rules: 1 to 128
 * characters, no control characters. It travels in the `X-Harbor-Site` header percent-encoded
 * (UTF-8), since a header holds ASCII only and a site may be named in any language.
 */
export const SITE_HEADER = 'x-harbor-site';
export const MAX_SITE_ID_LENGTH = 128;

export const isSiteId = (site: string): boolean => {
  const length = [...site].length;
  return length >= 1 && length <= MAX_SITE_ID_LENGTH && !/\p{Cc}/u.test(site) && site.trim() === site;
};

/** A site id percent-encoded: the header's value, and its field in the key file. */
export const encodeSite = (site: string): string => encodeURIComponent(site);

/** The site an encoded value names, or undefined when it is not a valid site id. */
export function decodeSite(value: string): string | undefined {
  try {
    const site = decodeURIComponent(value);
    return isSiteId(site) ? site : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A site gateway's instance (an id it makes at its first start, made anew on another board) rides
 * beside `X-Harbor-Site` with what it forwards, so a centre tells two gateways of one site id apart.
 */
export const INSTANCE_HEADER = 'x-harbor-instance';

/** An instance id: 1-64 of lower-case letters, digits and inner hyphens (a gateway makes 16 base32 characters). */
export const isInstanceId = (id: string): boolean => /^[a-z0-9][a-z0-9-]{0,63}$/.test(id);
