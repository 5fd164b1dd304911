import { SenderBufferV2 } from '@questdb/nodejs-client';
import type { QueuedReading } from '../queue/record-codec.js';

/**
 * Encodes readings as ILP protocol version 2 lines: symbols ship_id and cargo_id, the double
 * `value` in binary form (exact, -0 and subnormals included) and the designated timestamp in ns.
 */
export class IlpEncoder {
  readonly #buffer = new SenderBufferV2({ protocol: 'http', init_buf_size: 1 << 20, max_buf_size: 1 << 28 });

  constructor(readonly table: string) {}

  encode(rows: readonly QueuedReading[], start = 0, end = rows.length): Buffer {
    const buffer = this.#buffer;
    buffer.reset();
    for (let i = start; i < end; i++) {
      const row = rows[i]!;
      buffer.table(this.table).symbol('ship_id', row.shipId).symbol('cargo_id', row.cargoId).floatColumn('value', row.value);
      buffer.at(BigInt(row.timeNs), 'ns');
    }
    return buffer.toBufferNew() ?? Buffer.alloc(0);
  }
}
