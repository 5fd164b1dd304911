/**
 * What a forwarding sink sends of a series, by cargo id (the catalogue's `thinning:` section, checked
 * there; this is its shape as the delivery thread takes it). The first rule whose pattern matches a
 * cargo id applies; a cargo id no rule matches is forwarded whole.
 */
export type ThinningRule = DeadbandRule | SummaryRule;

/** Forward a reading when its value moved by more than `deadband` since the last one forwarded, or `maxIntervalMs` after it (by reading time). */
export interface DeadbandRule {
  match: string;
  deadband: number;
  /** Undefined: only a move beyond the deadband forwards a reading. */
  maxIntervalMs?: number | undefined;
}

/**
 * Instead of the readings, one summary per interval aligned to the epoch (min, max, mean, last,
 * count, each a reading of a derived cargo id at the interval's start), sent once the interval is
 * closed: see Thinning for when that is.
 */
export interface SummaryRule {
  match: string;
  summaryMs: number;
  latenessMs: number;
  /**
   * Longest cargo id summarised, in characters, so that its derived ids (`:count` adds 6) pass the
   * receiver's MAX_ID_LENGTH: the gateway sets it from its own. A longer id is left to the next
   * rule that matches, or sent whole.
   */
  maxCargoChars?: number;
}

export const isSummaryRule = (rule: ThinningRule): rule is SummaryRule => 'summaryMs' in rule;

/** The derived cargo ids of a summary, in the order they are sent: `pump_rpm:min`, `pump_rpm:max`, … */
export const SUMMARY_FIELDS = ['min', 'max', 'mean', 'last', 'count'] as const;

/** What the longest derived id adds to a cargo id (`:count`). */
export const SUMMARY_SUFFIX_CHARS = 1 + Math.max(...SUMMARY_FIELDS.map((field) => field.length));

/** The rules with each summary bounded to the cargo ids whose derived ids stay within `maxIdLength`. */
export const boundSummaries = (rules: readonly ThinningRule[], maxIdLength: number): ThinningRule[] =>
  rules.map((rule) => (isSummaryRule(rule) ? { ...rule, maxCargoChars: maxIdLength - SUMMARY_SUFFIX_CHARS } : rule));

/** Characters as MAX_ID_LENGTH counts them: code points. */
const charCount = (id: string): number => {
  let count = 0;
  for (const _ of id) count += 1;
  return count;
};

/** `reefer*_temp` as a test of cargo ids, case-insensitive, as the catalogue's display entries match. */
export function cargoMatcher(match: string): (cargoId: string) => boolean {
  const star = match.indexOf('*');
  if (star === -1) {
    const exact = match.toLowerCase();
    return (id) => id.length === match.length && id.toLowerCase() === exact;
  }
  const prefix = match.slice(0, star).toLowerCase();
  const suffix = match.slice(star + 1).toLowerCase();
  const min = prefix.length + suffix.length;
  return (id) => {
    if (id.length < min) return false;
    const lower = id.toLowerCase();
    return lower.startsWith(prefix) && lower.endsWith(suffix);
  };
}

/** How many cargo ids' rules are remembered; past it the memo starts over (bounded memory for any number of ids). */
const MEMO_MAX = 10_000;

/** The rule of each cargo id, looked up once per id. */
export class RuleBook {
  readonly rules: readonly ThinningRule[];
  readonly #tests: ((cargoId: string) => boolean)[];
  readonly #memo = new Map<string, ThinningRule | null>();

  constructor(rules: readonly ThinningRule[]) {
    this.rules = rules;
    this.#tests = rules.map((rule) => {
      const matches = cargoMatcher(rule.match);
      const longest = isSummaryRule(rule) ? rule.maxCargoChars : undefined;
      return longest === undefined ? matches : (id: string) => matches(id) && charCount(id) <= longest;
    });
  }

  ruleFor(cargoId: string): ThinningRule | undefined {
    let rule = this.#memo.get(cargoId);
    if (rule === undefined) {
      const index = this.#tests.findIndex((test) => test(cargoId));
      rule = index === -1 ? null : this.rules[index]!;
      if (this.#memo.size >= MEMO_MAX) this.#memo.clear();
      this.#memo.set(cargoId, rule);
    }
    return rule ?? undefined;
  }
}

/** The rules as one text, to tell whether they changed and to keep them with a sink's state. */
export const rulesText = (rules: readonly ThinningRule[]): string => JSON.stringify(rules);
