import { promisify } from 'node:util';
import { brotliCompress, constants, deflate, gzip } from 'node:zlib';
import type { Logger } from 'pino';
import { encodeSeriesBatch, SERIES_MEDIA_TYPE } from '../../reading/series-form.js';
import type { OutgoingReading } from '../outgoing-readings.js';
import { batchBody } from './batch-json.js';

/** `UPSTREAM_COMPRESSION`: the coding batches go in once the upstream takes it, or `off`: plain JSON always. */
export type UpstreamCompression = 'gzip' | 'deflate' | 'br' | 'off';
type Coding = Exclude<UpstreamCompression, 'off'>;

const brotli = promisify(brotliCompress);
// Brotli's quality 11 (its default) costs several times the CPU of quality 5 on a batch of readings
// for a few percent fewer bytes; the size hint lets it size its window to the batch.
const brotliBatch = (body: Buffer): Promise<Buffer> =>
  brotli(body, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 5,
      [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
      [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
    },
  });

const COMPRESS: Record<Coding, (body: Buffer) => Promise<Buffer>> = { gzip: promisify(gzip), deflate: promisify(deflate), br: brotliBatch };

/** A request's body as it goes, its headers beyond the usual, and where the chunk's readings stand in it. */
export interface EncodedBatch {
  body: string | Buffer;
  headers: Record<string, string>;
  /** `order[k]`: the chunk index of the body's reading k; undefined when the body keeps the chunk's order. */
  order: readonly number[] | undefined;
  /** Sent in a form the upstream had to learn of (compressed, or the series form). */
  learnt: boolean;
}

/** The answer headers that tell what the upstream takes beside plain JSON. */
export interface Offers {
  acceptEncoding: string | undefined;
  acceptPost: string | undefined;
}

/** Whether a list header (`gzip, deflate;q=0.5`) names `token` with a weight above 0. */
export function listNames(header: string | undefined, token: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((entry) => {
    const [name, ...parameters] = entry.split(';').map((part) => part.trim().toLowerCase());
    if (name !== token) return false;
    const q = parameters.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * What the link to the upstream carries: plain JSON batches, as the API has them, until the
 * upstream says in its answers that it takes more (a Harbor gateway does: `Accept-Encoding`,
 * `Accept-Post`, see http/forwarding-forms.ts); then batches compressed with the configured
 * coding (gzip while the upstream names gzip and not it: an older centre takes no Brotli) and,
 * where it takes them, in the series form. Nothing is sent compressed on a guess: an
 * upstream that does not decompress could take a compressed body for malformed JSON, whose 400
 * reads as "batch too large" and would end in dead letters. An upstream that answers 415 to a
 * batch in a learnt form (a centre rolled back to an older release) gets it again as plain JSON,
 * and plain JSON from then on until the gateway restarts; that is logged once.
 */
export class UpstreamLink {
  readonly #wanted: Coding | undefined;
  readonly #log: Logger;
  /** The coding batches go in: the one configured, or gzip where the upstream takes only that; undefined until told. */
  #coding: Coding | undefined;
  #takesSeries = false;
  /** A 415 to a learnt form: plain JSON for good. */
  #plainOnly = false;
  /** The upstream answered once: what it takes is known, whether or not it named anything. */
  #answered = false;

  constructor(compression: UpstreamCompression, logger: Logger) {
    this.#wanted = compression === 'off' ? undefined : compression;
    this.#log = logger;
  }

  /**
   * Compression is wanted but the upstream has not answered yet: the first request of a run is
   * better small, so that what follows it goes in the form its answer offers.
   */
  get asking(): boolean {
    return this.#wanted !== undefined && !this.#answered && !this.#plainOnly;
  }

  /** Learns from an answer what the upstream takes; told once, when batches start to go compressed. */
  learn(offers: Offers): void {
    this.#answered = true;
    if (this.#wanted === undefined || this.#plainOnly || this.#coding === this.#wanted) return;
    const before = this.#coding;
    if (listNames(offers.acceptEncoding, this.#wanted)) this.#coding = this.#wanted;
    else if (this.#coding === undefined && listNames(offers.acceptEncoding, 'gzip')) this.#coding = 'gzip';
    this.#takesSeries ||= listNames(offers.acceptPost, SERIES_MEDIA_TYPE);
    if (before !== this.#coding) {
      this.#log.info(
        { event: 'upstream_compression', sink: 'upstream', coding: this.#coding, seriesForm: this.#takesSeries },
        'the upstream takes compressed batches: they go compressed from now on',
      );
    }
  }

  /** The request body of a chunk in the form the upstream is known to take. */
  async encode(chunk: readonly OutgoingReading[]): Promise<EncodedBatch> {
    const series = this.#takesSeries && !this.#plainOnly ? encodeSeriesBatch(chunk.map((r) => r.reading)) : undefined;
    const text = series?.body ?? batchBody(chunk);
    const headers: Record<string, string> = { 'content-type': series === undefined ? 'application/json' : SERIES_MEDIA_TYPE };
    const order = series?.order;
    if (this.#coding === undefined || this.#plainOnly) return { body: text, headers, order, learnt: series !== undefined };
    headers['content-encoding'] = this.#coding;
    return { body: await COMPRESS[this.#coding](Buffer.from(text)), headers, order, learnt: true };
  }

  /**
   * The upstream answered 415 to `batch`: true when it went in a learnt form, so it goes again as
   * plain JSON (and so does every batch after it); false when it was plain JSON already.
   */
  refused(batch: EncodedBatch, answer: string): boolean {
    if (!batch.learnt) return false;
    if (!this.#plainOnly) {
      this.#plainOnly = true;
      this.#log.warn(
        { event: 'upstream_compression_refused', sink: 'upstream', answer },
        'the upstream refused a compressed batch (415): batches go as plain JSON until the gateway restarts',
      );
    }
    return true;
  }
}
