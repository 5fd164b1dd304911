import { open } from 'node:fs/promises';

/**
 * Streams one file field of a multipart/form-data request body (RFC 7578) to a file, without
 * holding the body in memory: an update bundle is hundreds of megabytes and the gateway's memory is
 * capped far below that. Other fields are read and dropped (each at most OTHER_FIELD_BYTES).
 */
export async function saveMultipartFile({
  request,
  field,
  destination,
  maxBytes,
}: {
  request: Request;
  field: string;
  destination: string;
  maxBytes: number;
}): Promise<{ bytes: number } | { problem: string }> {
  const boundary = boundaryOf(request.headers.get('content-type'));
  if (boundary === undefined) return { problem: 'the request is not multipart/form-data with a boundary' };
  if (request.body === null) return { problem: 'the request has no body' };
  const file = await open(destination, 'w', 0o640);
  try {
    const parts = new PartReader(boundary);
    let saved: number | undefined;
    let current: { name: string | undefined; bytes: number } | undefined;
    for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
      for (const event of parts.push(Buffer.from(chunk))) {
        if (event.type === 'headers') {
          current = { name: fieldName(event.headers), bytes: 0 };
          if (current.name === field && saved !== undefined) return { problem: `the form holds more than one ${field}` };
        } else if (event.type === 'data' && current !== undefined) {
          current.bytes += event.data.length;
          if (current.name === field) {
            if (current.bytes > maxBytes) return { problem: `${field} is larger than ${maxBytes} bytes` };
            await file.write(event.data);
          } else if (current.bytes > OTHER_FIELD_BYTES) {
            return { problem: `the form field ${current.name ?? '(unnamed)'} is too large` };
          }
        } else if (event.type === 'end' && current !== undefined) {
          if (current.name === field) saved = current.bytes;
          current = undefined;
        } else if (event.type === 'problem') {
          return { problem: event.problem };
        }
      }
      if (parts.done) break;
    }
    if (!parts.done) return { problem: 'the upload ended before the form did (connection lost?)' };
    if (saved === undefined) return { problem: `the form holds no ${field}` };
    if (saved === 0) return { problem: `${field} is empty` };
    return { bytes: saved };
  } finally {
    await file.close();
  }
}

const OTHER_FIELD_BYTES = 64 * 1024;
const MAX_HEADER_BYTES = 16 * 1024;
const CRLF = Buffer.from('\r\n');
const HEADERS_END = Buffer.from('\r\n\r\n');

type PartEvent =
  | { type: 'headers'; headers: Map<string, string> }
  | { type: 'data'; data: Buffer }
  | { type: 'end' }
  | { type: 'problem'; problem: string };

/** The boundary parameter of a multipart/form-data content type. */
export function boundaryOf(contentType: string | null): string | undefined {
  if (contentType === null || !/^\s*multipart\/form-data\s*;/i.test(contentType)) return undefined;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return match?.[1] ?? match?.[2];
}

/** The `name` of a part's Content-Disposition: form-data header. */
function fieldName(headers: Map<string, string>): string | undefined {
  const disposition = headers.get('content-disposition') ?? '';
  return /(?:^|;)\s*name="([^"]*)"/i.exec(disposition)?.[1] ?? /(?:^|;)\s*name=([^\s;"]+)/i.exec(disposition)?.[1];
}

/**
 * The parts of a multipart body fed in chunks: each part's headers, its data in pieces as they
 * arrive, and its end. A delimiter split across chunks is found: the last bytes that could begin
 * one are held back until the next chunk.
 */
export class PartReader {
  #buffer: Buffer = Buffer.alloc(0);
  #state: 'preamble' | 'after-delimiter' | 'headers' | 'data' | 'done' = 'preamble';
  readonly #first: Buffer;
  readonly #delimiter: Buffer;

  constructor(boundary: string) {
    this.#first = Buffer.from(`--${boundary}`);
    this.#delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  get done(): boolean {
    return this.#state === 'done';
  }

  push(chunk: Buffer): PartEvent[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const events: PartEvent[] = [];
    for (;;) {
      if (this.#state === 'preamble') {
        // The body starts with the boundary, or a preamble and then CRLF and the boundary.
        const at = this.#buffer.indexOf(this.#first);
        if (at < 0) {
          this.#keep(this.#first.length - 1);
          return events;
        }
        this.#buffer = this.#buffer.subarray(at + this.#first.length);
        this.#state = 'after-delimiter';
      } else if (this.#state === 'after-delimiter') {
        if (this.#buffer.length < 2) return events;
        if (this.#buffer[0] === 0x2d && this.#buffer[1] === 0x2d) {
          this.#state = 'done';
          this.#buffer = Buffer.alloc(0);
          return events;
        }
        // Transport padding (spaces, tabs) may follow a delimiter before its CRLF.
        const lineEnd = this.#buffer.indexOf(CRLF);
        if (lineEnd < 0) {
          if (this.#buffer.length > 1024)
            return [...events, { type: 'problem', problem: 'the form is malformed (no line end after a boundary)' }];
          return events;
        }
        this.#buffer = this.#buffer.subarray(lineEnd + 2);
        this.#state = 'headers';
      } else if (this.#state === 'headers') {
        const end = this.#buffer.indexOf(HEADERS_END);
        const blank = this.#buffer.subarray(0, 2).equals(CRLF);
        if (end < 0 && !blank) {
          if (this.#buffer.length > MAX_HEADER_BYTES)
            return [...events, { type: 'problem', problem: 'a part of the form has too large headers' }];
          return events;
        }
        const text = blank ? '' : this.#buffer.subarray(0, end).toString('latin1');
        this.#buffer = this.#buffer.subarray(blank ? 2 : end + 4);
        const headers = new Map<string, string>();
        for (const line of text.split('\r\n')) {
          const colon = line.indexOf(':');
          if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
        }
        events.push({ type: 'headers', headers });
        this.#state = 'data';
      } else if (this.#state === 'data') {
        const at = this.#buffer.indexOf(this.#delimiter);
        if (at < 0) {
          const safe = this.#buffer.length - (this.#delimiter.length - 1);
          if (safe > 0) {
            events.push({ type: 'data', data: this.#buffer.subarray(0, safe) });
            this.#buffer = this.#buffer.subarray(safe);
          }
          return events;
        }
        if (at > 0) events.push({ type: 'data', data: this.#buffer.subarray(0, at) });
        events.push({ type: 'end' });
        this.#buffer = this.#buffer.subarray(at + this.#delimiter.length);
        this.#state = 'after-delimiter';
      } else {
        return events;
      }
    }
  }

  /** Keeps only the last n bytes (those that may begin a delimiter). */
  #keep(n: number): void {
    if (this.#buffer.length > n) this.#buffer = this.#buffer.subarray(this.#buffer.length - n);
  }
}
