import { describe, expect, it } from 'vitest';
import { SinkWakes } from './sink-wakes.js';

// The local QuestDB (0) and Kafka (2) with batches of 20,000, the upstream (1) with 1,000.
const BATCHES = [20_000, 1000, 20_000];

describe('SinkWakes', () => {
  it("wakes a sink for a whole batch of its own appended since its last read, never for another's", () => {
    const wakes = new SinkWakes(BATCHES);
    expect(wakes.appended(999)).toBeUndefined();
    expect(wakes.appended(1000)).toEqual([1]);
    // Once per read: the sink is awake, and reads.
    expect(wakes.appended(1800)).toBeUndefined();
    wakes.reading(1);
    expect(wakes.appended(2799)).toBeUndefined();
    expect(wakes.appended(2800)).toEqual([1]);
    wakes.reading(1);
    expect(wakes.appended(19_999)).toEqual([1]);
    expect(wakes.appended(20_000)).toEqual([0, 2]);
  });

  it("counts from each sink's own last read", () => {
    const wakes = new SinkWakes(BATCHES);
    expect(wakes.appended(15_000)).toEqual([1]);
    wakes.reading(0);
    expect(wakes.appended(20_000)).toEqual([2]);
    expect(wakes.appended(34_999)).toBeUndefined();
    expect(wakes.appended(35_000)).toEqual([0]);
  });

  it('tells the delivery thread through shared memory, past the 32-bit wrap of the count', () => {
    const ingest = new SinkWakes(BATCHES);
    const delivery = new SinkWakes(BATCHES, ingest.buffer);
    const start = 2 ** 32 - 500;
    ingest.appended(start);
    delivery.reading(1);
    expect(ingest.appended(start + 999)).toBeUndefined();
    expect(ingest.appended(start + 1000)).toEqual([1]);
  });
});
