import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { QueueRecord } from '../../queue/queue-reader.js';
import { decodeSeriesState, encodeSeriesState } from './series-state-codec.js';
import { Thinning, type SeriesState, type StreamSplit } from './thinning.js';
import type { ThinningRule } from './thinning-rules.js';

// The thinning of a forwarding sink against a plain reference: every reading of the whole sequence
// in turn, the rules as docs/fleet.md ("Thinning") states them. The sink's engine works in batches, keeps its
// state as text between them, rolls a batch back when it was not delivered, and starts from that
// text after a crash: whatever the cuts and crashes, what it sends for a record must be what the
// reference sends for it.

interface Reading {
  ship: string;
  cargo: string;
  timeMs: number;
  value: number;
}
interface Rec {
  receivedMs: number;
  site?: string;
  readings: Reading[];
}

const fmt = (v: number): string => (Object.is(v, -0) ? '-0' : String(v));
const nsOf = (ms: number): string => (ms === 0 ? '0' : `${ms}000000`);
/** Reading times carry a sub-millisecond part, as stored times do. */
const lineOf = (r: Reading, sub: number): string =>
  `${r.timeMs === 0 ? sub : `${r.timeMs}${String(sub).padStart(6, '0')}`}\t${r.ship}\t${r.cargo}\t${fmt(r.value)}`;

function matches(pattern: string, id: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern.toLowerCase() === id.toLowerCase();
  const p = pattern.slice(0, star).toLowerCase();
  const s = pattern.slice(star + 1).toLowerCase();
  return id.length >= p.length + s.length && id.toLowerCase().startsWith(p) && id.toLowerCase().endsWith(s);
}

/**
 * The reference: for each record, the lines sent because of it (its readings that go, then the
 * summaries it closed), in order. One pass, all state in plain maps.
 */
function reference(records: readonly Rec[], rules: readonly ThinningRule[], split?: StreamSplit): string[][] {
  type Acc = { min: number; max: number; sum: number; count: number; last: number; lastNs: bigint };
  type Summary = { i: number; l: number; closedUntil: number; recv: number; open: Map<number, Acc>; origin: string };
  const deadband = new Map<string, { value: number; ms: number }>();
  const summary = new Map<string, Summary>();
  const sent: string[][] = [];
  const closeFrom = (key: string, s: Summary, test: (start: number) => boolean, into: Map<string, string[]>): void => {
    for (const start of [...s.open.keys()].sort((a, b) => a - b)) {
      if (!test(start)) break;
      const a = s.open.get(start)!;
      s.open.delete(start);
      s.closedUntil = Math.max(s.closedUntil, start + s.i);
      const [, ship, cargo] = key.split('\t');
      const lines = into.get(s.origin) ?? [];
      into.set(s.origin, lines);
      const mean = a.sum / a.count;
      for (const [field, v] of [
        ['min', a.min],
        ['max', a.max],
        ['mean', mean],
        ['last', a.last],
        ['count', a.count],
      ] as const) {
        lines.push(`${nsOf(start)}\t${ship}\t${cargo}:${field}\t${fmt(v)}`);
      }
    }
  };
  for (const [index, rec] of records.entries()) {
    const out: string[] = [];
    const closed = new Map<string, string[]>();
    const origin = rec.site === undefined ? 'o' : `r${rec.site}`;
    for (const [key, s] of [...summary].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (s.open.size > 0 && rec.receivedMs >= s.recv + s.i + s.l) closeFrom(key, s, () => true, closed);
    }
    rec.readings.forEach((r, sub) => {
      const key = `${origin}\t${r.ship}\t${r.cargo}`;
      const rule = rules.find((x) => matches(x.match, r.cargo));
      if (rule === undefined || !('summaryMs' in rule)) {
        const s = summary.get(key);
        if (s !== undefined) {
          closeFrom(key, s, () => true, closed);
          summary.delete(key);
        }
      }
      if (rule === undefined) {
        deadband.delete(key);
        out.push(lineOf(r, sub));
      } else if ('summaryMs' in rule) {
        deadband.delete(key);
        let s = summary.get(key);
        if (s !== undefined && (s.i !== rule.summaryMs || s.l !== rule.latenessMs)) {
          closeFrom(key, s, () => true, closed);
          s = { i: rule.summaryMs, l: rule.latenessMs, closedUntil: s.closedUntil, recv: 0, open: new Map(), origin };
          summary.set(key, s);
        }
        if (s === undefined) {
          s = { i: rule.summaryMs, l: rule.latenessMs, closedUntil: Number.NEGATIVE_INFINITY, recv: 0, open: new Map(), origin };
          summary.set(key, s);
        }
        s.recv = rec.receivedMs;
        const sum = s;
        closeFrom(key, sum, (start) => start + sum.i + sum.l <= r.timeMs, closed);
        const start = Math.floor(r.timeMs / s.i) * s.i;
        const boundary = split === undefined ? undefined : Math.floor(split.splitMs / s.i) * s.i;
        const owned = boundary === undefined || (split!.role === 'head' ? start >= boundary : start < boundary);
        if (start >= s.closedUntil && owned) {
          if (!s.open.has(start) && s.open.size >= 32) {
            const oldest = Math.min(...s.open.keys());
            closeFrom(key, sum, (x) => x === oldest, closed);
          }
          const ns = BigInt(lineOf(r, sub).split('\t')[0]!);
          const a = s.open.get(start);
          if (a === undefined) s.open.set(start, { min: r.value, max: r.value, sum: r.value, count: 1, last: r.value, lastNs: ns });
          else {
            if (r.value < a.min || (r.value === a.min && Object.is(r.value, -0))) a.min = r.value;
            if (r.value > a.max || (r.value === a.max && Object.is(a.max, -0))) a.max = r.value;
            a.sum += r.value;
            a.count += 1;
            if (ns >= a.lastNs) {
              a.last = r.value;
              a.lastNs = ns;
            }
          }
        }
      } else {
        const last = deadband.get(key);
        if (
          last === undefined ||
          Math.abs(r.value - last.value) > rule.deadband ||
          (rule.maxIntervalMs !== undefined && r.timeMs - last.ms >= rule.maxIntervalMs)
        ) {
          deadband.set(key, { value: r.value, ms: r.timeMs });
          out.push(lineOf(r, sub));
        }
      }
    });
    for (const lines of closed.values()) out.push(...lines);
    sent[index] = out;
  }
  return sent;
}

const asQueueRecord = (rec: Rec, id: number): QueueRecord => {
  const payload = rec.readings.map((r, sub) => lineOf(r, sub)).join('\n');
  const record: QueueRecord = { segment: 1, id, receivedMs: rec.receivedMs, readings: rec.readings.length, bytes: payload.length, payload };
  if (rec.site !== undefined) record.site = rec.site;
  return record;
};

const linesOf = (records: readonly QueueRecord[]): string[] => records.flatMap((r) => r.payload.split('\n'));

/** The state as the queue file keeps it, read back. */
const reloaded = (state: ReadonlyMap<string, SeriesState>): Map<string, SeriesState> =>
  new Map([...state].map(([k, v]) => [k, decodeSeriesState(encodeSeriesState(v))]));

const ruleArb: fc.Arbitrary<ThinningRule> = fc.oneof(
  fc.record({
    match: fc.constantFrom('temp', 'temp*', '*_rpm', 'level'),
    deadband: fc.constantFrom(0, 0.5, 2),
    maxIntervalMs: fc.option(fc.constantFrom(1000, 5000), { nil: undefined }),
  }),
  fc.record({
    match: fc.constantFrom('temp', 'temp*', '*_rpm', 'level'),
    summaryMs: fc.constantFrom(1000, 3000),
    latenessMs: fc.constantFrom(0, 500, 4000),
  }),
);

/** Records of a few series, times mostly rising with some out of order, values with repeats and -0. */
const recordsArb: fc.Arbitrary<Rec[]> = fc
  .array(
    fc.record({
      gapMs: fc.integer({ min: 0, max: 2500 }),
      site: fc.option(fc.constantFrom('pier 7', 'north'), { nil: undefined }),
      readings: fc.array(
        fc.record({
          ship: fc.constantFrom('s1', 's2'),
          cargo: fc.constantFrom('temp', 'temp_2', 'pump_rpm', 'level', 'other'),
          skewMs: fc.integer({ min: -6000, max: 1500 }),
          value: fc.constantFrom(-0, 0, 0.25, 1, 1.5, -3, 7, 100),
        }),
        { minLength: 1, maxLength: 4 },
      ),
    }),
    { minLength: 1, maxLength: 60 },
  )
  .map((raw) => {
    let clock = 1_700_000_000_000;
    return raw.map((r) => {
      clock += r.gapMs;
      const rec: Rec = {
        receivedMs: clock,
        readings: r.readings.map((x) => ({ ship: x.ship, cargo: x.cargo, timeMs: clock + x.skewMs, value: x.value })),
      };
      if (r.site !== undefined) rec.site = r.site;
      return rec;
    });
  });

/** Batch cuts and crashes: each step takes 1 to 8 records; a crash sends the batch, then loses it and the engine. */
const stepsArb = fc.array(fc.record({ take: fc.integer({ min: 1, max: 8 }), crash: fc.boolean() }), { minLength: 1, maxLength: 80 });

describe('thinning', () => {
  it('sends for each record what the reference sends, in batches of any size, across crashes at any point', () => {
    fc.assert(
      fc.property(recordsArb, fc.array(ruleArb, { maxLength: 3 }), stepsArb, (recs, rules, steps) => {
        const expected = reference(recs, rules);
        const records = recs.map(asQueueRecord);
        let committed = new Map<string, SeriesState>();
        let engine = new Thinning({ sink: 'upstream', versions: [{ rules }] });
        const delivered: string[] = [];
        let at = 0;
        let crashed = false;
        for (let s = 0; at < records.length; s++) {
          const step = steps[s % steps.length]!;
          const batch = records.slice(at, at + step.take);
          const sent = linesOf(engine.thin(batch).records).filter((l) => l !== '');
          // Whatever is sent, also an attempt a crash cuts off, is exactly the reference's for those records.
          expect(sent).toEqual(expected.slice(at, at + batch.length).flat());
          // A crash, then the same records again (in another cut): no two crashes in a row, so it ends.
          crashed = step.crash && !crashed;
          if (crashed) {
            engine = new Thinning({ sink: 'upstream', versions: [{ rules }], state: reloaded(committed) });
            continue;
          }
          engine.commit();
          committed = reloaded(engine.state);
          delivered.push(...sent);
          at += batch.length;
        }
        expect(delivered).toEqual(expected.flat());
      }),
      { numRuns: 300 },
    );
  });

  it('sends the same again after a failed delivery rolls the batch back', () => {
    fc.assert(
      fc.property(recordsArb, fc.array(ruleArb, { maxLength: 3 }), stepsArb, (recs, rules, steps) => {
        const expected = reference(recs, rules);
        const records = recs.map(asQueueRecord);
        const engine = new Thinning({ sink: 'upstream', versions: [{ rules }] });
        let at = 0;
        let failed = false;
        for (let s = 0; at < records.length; s++) {
          const step = steps[s % steps.length]!;
          const batch = records.slice(at, at + step.take);
          const sent = linesOf(engine.thin(batch).records).filter((l) => l !== '');
          expect(sent).toEqual(expected.slice(at, at + batch.length).flat());
          failed = step.crash && !failed;
          if (failed) engine.rollback();
          else {
            engine.commit();
            at += batch.length;
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('splits a backlog and a head by interval: each summary interval is sent by one stream only', () => {
    fc.assert(
      fc.property(recordsArb, fc.array(ruleArb, { minLength: 1, maxLength: 3 }), fc.nat(), (recs, rules, cut) => {
        const at = cut % recs.length;
        const splitMs = recs[at]!.receivedMs;
        const backlog = new Thinning({ sink: 'upstream', versions: [{ rules }], split: { role: 'backlog', splitMs } });
        const head = new Thinning({ sink: 'upstream', versions: [{ rules }], split: { role: 'head', splitMs } });
        const records = recs.map(asQueueRecord);
        const fromHead = linesOf(head.thin(records.slice(at)).records);
        const fromBacklog = linesOf(backlog.thin(records.slice(0, at), true).records);
        expect(fromHead).toEqual(reference(recs.slice(at), rules, { role: 'head', splitMs }).flat());
        const summaryKeys = (lines: string[]) => lines.filter((l) => l.includes(':count')).map((l) => l.split('\t').slice(0, 3).join('\t'));
        const both = new Set(summaryKeys(fromHead));
        expect(summaryKeys(fromBacklog).filter((k) => both.has(k))).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('counts the readings it holds back and those of intervals already closed', () => {
    const rules: ThinningRule[] = [
      { match: 'rpm', summaryMs: 1000, latenessMs: 0 },
      { match: 'temp', deadband: 1 },
    ];
    const engine = new Thinning({ sink: 'upstream', versions: [{ rules }] });
    const rec = (id: number, ms: number, lines: string[]): QueueRecord => ({
      segment: 1,
      id,
      receivedMs: ms,
      readings: lines.length,
      bytes: 0,
      payload: lines.join('\n'),
    });
    const first = engine.thin([
      rec(1, 1000, ['1000000000\ts\trpm\t5', '1500000000\ts\trpm\t7', '1000000000\ts\ttemp\t20', '1100000000\ts\ttemp\t20.5']),
      rec(2, 2000, ['2000000000\ts\trpm\t1', '1900000000\ts\trpm\t9', '2000000000\ts\ttemp\t22']),
    ]);
    expect(linesOf(first.records)).toEqual([
      '1000000000\ts\ttemp\t20',
      '2000000000\ts\ttemp\t22',
      '1000000000\ts\trpm:min\t5',
      '1000000000\ts\trpm:max\t7',
      '1000000000\ts\trpm:mean\t6',
      '1000000000\ts\trpm:last\t7',
      '1000000000\ts\trpm:count\t2',
    ]);
    expect(first).toMatchObject({ thinned: 5, late: 1, summaries: 5 });
  });

  it('sends records re-queued for its own sink whole, and passes a corrupt record on for the target to refuse', () => {
    const engine = new Thinning({ sink: 'upstream', versions: [{ rules: [{ match: '*', deadband: 100 }] }] });
    const requeued: QueueRecord = {
      segment: 1,
      id: 1,
      receivedMs: 1,
      readings: 2,
      bytes: 0,
      payload: '1\ts\tt\t1\n2\ts\tt\t1',
      sink: 'upstream',
    };
    const corrupt: QueueRecord = { segment: 1, id: 2, receivedMs: 1, readings: 1, bytes: 0, payload: 'not a line' };
    expect(engine.thin([requeued, corrupt]).records).toEqual([requeued, corrupt]);
  });

  it('applies new rules from their position on', () => {
    const engine = new Thinning({
      sink: 'upstream',
      versions: [{ rules: [] }, { from: { segment: 1, lastId: 1 }, rules: [{ match: 'temp', deadband: 10 }] }],
    });
    const rec = (id: number, value: number): QueueRecord => ({
      segment: 1,
      id,
      receivedMs: id,
      readings: 1,
      bytes: 0,
      payload: `${id}000000\ts\ttemp\t${value}`,
    });
    expect(linesOf(engine.thin([rec(1, 1), rec(2, 2), rec(3, 3), rec(4, 30)]).records)).toEqual([
      '1000000\ts\ttemp\t1',
      '2000000\ts\ttemp\t2',
      '4000000\ts\ttemp\t30',
    ]);
  });
});
