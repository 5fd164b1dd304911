import { describe, expect, it } from 'vitest';
import { FrameReader, type FrameProblem } from './frame-reader.js';

function reader(maxBytes: number, admit: (size: number) => boolean = () => true) {
  const frames: Buffer[] = [];
  const problems: [FrameProblem, number][] = [];
  const headers: number[] = [];
  const r = new FrameReader(maxBytes, {
    header: (size) => {
      headers.push(size);
      return admit(size);
    },
    frame: (f) => frames.push(Buffer.from(f)),
    problem: (p, size) => problems.push([p, size]),
  });
  return { r, frames, problems, headers };
}

const packet = (type: number, body: Buffer): Buffer => {
  const length: number[] = [];
  let n = body.length;
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    length.push(byte);
  } while (n > 0);
  return Buffer.concat([Buffer.from([type, ...length]), body]);
};

describe('FrameReader', () => {
  it('cuts a stream into whole packets however it is split', () => {
    const stream = Buffer.concat([packet(0x30, Buffer.alloc(3, 1)), packet(0xc0, Buffer.alloc(0)), packet(0x32, Buffer.alloc(200, 2))]);
    for (const step of [1, 2, 3, 7, stream.length]) {
      const { r, frames, problems } = reader(1024);
      for (let i = 0; i < stream.length; i += step) r.push(stream.subarray(i, i + step));
      expect(problems).toEqual([]);
      expect(frames.map((f) => f.length)).toEqual([5, 2, 203]);
      expect(Buffer.concat(frames)).toEqual(stream);
      expect(r.midPacket).toBe(false);
    }
  });

  it('refuses a packet announcing more than the limit from its header, before its body', () => {
    const { r, frames, problems } = reader(1000);
    // 268,435,455 bytes announced (the largest remaining length), then nothing.
    r.push(Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f]));
    expect(problems).toEqual([['too_large', 1 + 4 + 268_435_455]]);
    r.push(Buffer.alloc(10));
    expect(frames).toEqual([]);
    expect(r.buffered).toBe(0);
  });

  it('refuses a remaining length longer than four bytes as malformed', () => {
    const { r, problems } = reader(1 << 30);
    r.push(Buffer.from([0x30, 0x80, 0x80, 0x80, 0x80, 0x01]));
    expect(problems).toEqual([['malformed_length', 0]]);
  });

  it('asks before keeping a packet, and stops when refused', () => {
    const { r, frames, headers } = reader(1 << 20, (size) => size < 100);
    r.push(packet(0x30, Buffer.alloc(10)));
    r.push(packet(0x30, Buffer.alloc(500)));
    r.push(packet(0x30, Buffer.alloc(10)));
    expect(headers).toEqual([12, 503]);
    expect(frames.map((f) => f.length)).toEqual([12]);
  });
});
