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
