import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { isDeviceRequest, KeylessLane } from './keyless-lane.js';

/** A request on `socket`, and the answer written to it, if any. */
function request(socket: { destroyed: boolean; destroy(): void }, url = '/console/', headers: Record<string, string> = {}) {
  const answer: { status?: number; headers?: Record<string, string>; body?: string } = {};
  const res = {
    writeHead(status: number, head: Record<string, string>) {
      answer.status = status;
      answer.headers = head;
      return {
        end: (body: string) => {
          answer.body = body;
        },
      };
    },
  };
  return { req: { socket, url, headers } as unknown as IncomingMessage, res: res as unknown as ServerResponse, answer };
}

const socket = () =>
  Object.assign(new EventEmitter(), {
    destroyed: false,
    destroy() {
      this.destroyed = true;
    },
  });

describe('keyless lane', () => {
  it('starts one request a turn of the event loop, in the order they came, with the I/O of each turn between two', async () => {
    const lane = new KeylessLane();
    const events: string[] = [];
    for (let i = 0; i < 4; i++) lane.enqueue(() => events.push(`start ${i}`));
    expect(lane.waiting).toBe(4);
    // A callback that schedules itself with setImmediate runs once a turn of the loop.
    let turns = 0;
    const turn = (): void => {
      events.push('turn');
      if (++turns < 10) setImmediate(turn);
    };
    setImmediate(turn);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const starts = events.filter((e) => e.startsWith('start'));
    expect(starts).toEqual(['start 0', 'start 1', 'start 2', 'start 3']);
    // Never two starts without a turn between them.
    for (let i = 1; i < events.length; i++) expect(`${events[i - 1]} ${events[i]}`).not.toMatch(/^start \d start/);
    expect(lane.waiting).toBe(0);
  });

  it("runs a start's awaits that need no I/O in its own turn", async () => {
    const lane = new KeylessLane();
    const events: string[] = [];
    lane.enqueue(async () => {
      events.push('a begins');
      await Promise.resolve();
      await Promise.resolve();
      events.push('a answers');
    });
    lane.enqueue(() => events.push('b begins'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(events).toEqual(['a begins', 'a answers', 'b begins']);
  });

  it('keeps its waiting list short however many pass through it', async () => {
    const lane = new KeylessLane(undefined, (turn) => queueMicrotask(turn));
    let started = 0;
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 100; i++)
        lane.enqueue(() => {
          started += 1;
        });
      await new Promise((resolve) => setTimeout(resolve, 0));
    }
    expect(started).toBe(5000);
    expect(lane.waiting).toBe(0);
  });

  it('closes a connection with more than perConnection requests waiting, and skips what was waiting on it', async () => {
    const lane = new KeylessLane({ waiting: 100, perConnection: 2 });
    const pipelining = socket();
    const started: number[] = [];
    for (let i = 0; i < 5; i++) {
      const { req, res } = request(pipelining);
      lane.admit(req, res, () => started.push(i));
    }
    expect(pipelining.destroyed).toBe(true);
    expect(lane.waiting).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(started).toEqual([]);
    // A connection whose request was answered may send the next.
    const browser = socket();
    for (let i = 0; i < 4; i++) {
      const { req, res } = request(browser);
      lane.admit(req, res, () => started.push(i));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect([browser.destroyed, started]).toEqual([false, [0, 1, 2, 3]]);
  });

  it('answers 503 with Retry-After at once when `waiting` requests wait already', () => {
    const lane = new KeylessLane({ waiting: 3, perConnection: 2 }, () => undefined);
    for (let i = 0; i < 3; i++) {
      const { req, res, answer } = request(socket());
      lane.admit(req, res, () => undefined);
      expect(answer.status).toBeUndefined();
    }
    const { req, res, answer } = request(socket());
    lane.admit(req, res, () => undefined);
    expect(answer.status).toBe(503);
    expect(answer.headers?.['Retry-After']).toBe('1');
    expect(JSON.parse(answer.body ?? '{}').details?.[0]).toMatchObject({ loc: ['request'], type: 'busy' });
    expect(lane.waiting).toBe(3);
  });

  it("takes a request to the API with a key as a device's, and nothing else: the console and /metrics wait whatever they carry", () => {
    const device = (url: string, headers: Record<string, string>) => isDeviceRequest(request(socket(), url, headers).req);
    expect(device('/api/v2/ingest', { 'x-api-key': 'k' })).toBe(true);
    expect(device('/api/v2/ingest/batch', { 'x-api-key': 'wrong' })).toBe(true);
    expect(device('/api/v2/ingest', {})).toBe(false);
    expect(device('/console/login', { 'x-api-key': 'k' })).toBe(false);
    expect(device('/metrics', { 'x-api-key': 'k' })).toBe(false);
    expect(device('/status', { 'x-api-key': 'k' })).toBe(false);
  });
});
