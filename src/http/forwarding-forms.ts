import type { Context } from 'hono';
import { SERIES_MEDIA_TYPE } from '../reading/series-form.js';
import { ACCEPTED_ENCODINGS } from './encoded-body.js';

const ACCEPTED_BATCH_TYPES = `application/json, ${SERIES_MEDIA_TYPE}`;

/**
 * Tells a gateway forwarding to this one (its requests name their site) what it may send instead
 * of plain JSON: compressed bodies (`Accept-Encoding`, as RFC 7694 has a server name the codings it
 * takes) and batches in the series form (`Accept-Post`). Told only while its requests do not use
 * them yet, so a link that does pays no header for it; devices are told nothing.
 */
export function advertiseForwardingForms(c: Context): void {
  if (c.req.header('content-encoding') === undefined) c.header('Accept-Encoding', ACCEPTED_ENCODINGS);
  if (c.req.header('content-type')?.toLowerCase().startsWith(SERIES_MEDIA_TYPE) !== true) c.header('Accept-Post', ACCEPTED_BATCH_TYPES);
}
