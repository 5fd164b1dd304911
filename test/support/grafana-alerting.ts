// What Grafana's alerting makes of the provisioned rules: the SQL its PostgreSQL data source runs
// for a rule's query (macros expanded over the rule's relative time range), the conversion of a
// table answer into alert instances (text columns are labels, the one number is the value), and
// the threshold expression's verdict.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { parse } from 'yaml';
import { expandSql } from '../../scripts/lib/grafana-expand.mjs';

export const ALERTING_DIR = join(import.meta.dirname, '..', '..', 'grafana', 'provisioning', 'alerting');

/** A rule query's model: SQL for the data source, or a server-side expression (datasource `__expr__`). */
export interface AlertQueryModel {
  refId: string;
  rawSql?: string;
  type?: string;
  expression?: string;
  conditions?: { evaluator: { type: string; params: number[] } }[];
}

export interface AlertRule {
  uid: string;
  title: string;
  condition: string;
  for: string;
  data: { refId: string; datasourceUid: string; relativeTimeRange?: { from: number; to: number }; model: AlertQueryModel }[];
  noDataState: string;
  execErrState: string;
  annotations: Record<string, string>;
  labels: Record<string, string>;
}

export function loadAlertRules(file = 'harbor-rules.yaml'): {
  groups: { name: string; folder: string; interval: string; rules: AlertRule[] }[];
} {
  return parse(readFileSync(join(ALERTING_DIR, file), 'utf8'));
}

/** PostgreSQL type ids Grafana reads as numbers; text ids become labels. */
const NUMBER_TYPES = new Set([20, 21, 23, 700, 701, 1700]);
const TEXT_TYPES = new Set([25, 1043]);

export interface AlertInstance {
  labels: Record<string, string>;
  value: number | null;
  firing: boolean;
}

/**
 * Runs a rule's SQL query and applies its threshold, giving each row's labels, value and verdict.
 * Grafana refuses a table answer for alerting unless it has exactly one number column and text
 * columns otherwise; so does this.
 */
export async function evaluateRule(
  client: pg.Client,
  rule: AlertRule,
  rename: (sql: string) => string,
  now = Date.now(),
): Promise<AlertInstance[]> {
  const query = rule.data.find((d) => d.datasourceUid !== '__expr__');
  const threshold = rule.data.find((d) => d.refId === rule.condition);
  const evaluator = threshold?.model.conditions?.[0]?.evaluator;
  if (
    query?.model.rawSql === undefined ||
    threshold?.model.type !== 'threshold' ||
    threshold.model.expression !== query.refId ||
    evaluator === undefined
  ) {
    throw new Error(`${rule.uid}: expected one SQL query and a threshold on it as the condition`);
  }
  const span = query.relativeTimeRange ?? { from: 600, to: 0 };
  const text = expandSql(rename(query.model.rawSql), { range: { from: now - span.from * 1000, to: now - span.to * 1000 } });
  const result = await client.query(text);
  const numbers = result.fields.filter((f) => NUMBER_TYPES.has(f.dataTypeID));
  const others = result.fields.filter((f) => !NUMBER_TYPES.has(f.dataTypeID));
  if (numbers.length !== 1 || others.some((f) => !TEXT_TYPES.has(f.dataTypeID))) {
    throw new Error(
      `${rule.uid}: Grafana needs one number column and text columns, got ${result.fields.map((f) => `${f.name}:${f.dataTypeID}`).join(', ')}`,
    );
  }
  const compare = (value: number): boolean => {
    const [a, b] = evaluator.params;
    switch (evaluator.type) {
      case 'gt':
        return value > a!;
      case 'lt':
        return value < a!;
      case 'within_range':
        return value > a! && value < b!;
      case 'outside_range':
        return value < a! || value > b!;
      default:
        throw new Error(`${rule.uid}: evaluator ${evaluator.type} not emulated`);
    }
  };
  return result.rows.map((row) => {
    const raw = row[numbers[0]!.name];
    const value = raw === null ? null : Number(raw);
    return {
      labels: Object.fromEntries(others.map((f) => [f.name, String(row[f.name])])),
      value,
      firing: value !== null && compare(value),
    };
  });
}

/** A Go string literal's text: the escapes the provisioned templates use. */
const goString = (literal: string): string => literal.replace(/\\(["\\])/g, '$1');

/** Go's `printf "%.Nf"` (JavaScript rounds ties up where Go rounds them to even; the tests use no ties). */
const fixed = (format: string, value: number): string => {
  const match = /^%\.(\d)f$/.exec(format);
  if (match === null) throw new Error(`printf format ${format} not emulated`);
  return value.toFixed(Number(match[1]));
};

/**
 * An annotation of an alert instance as Grafana's alerting writes it from the rule's Go template:
 * `{{ $labels.name }}`, `{{ if $labels.name }}…{{ end }}`, `{{ printf "%.Nf" $values.A.Value }}`
 * and `reReplaceAll` of such a printf. Any other action throws, so a template the tests cannot
 * read is never taken as right.
 */
export function renderTemplate(template: string, instance: AlertInstance): string {
  const label = (name: string): string => {
    const value = instance.labels[name];
    if (value === undefined) throw new Error(`template names label ${name}, which the query does not answer`);
    return value;
  };
  const value = instance.value ?? Number.NaN;
  const conditional = template.replace(/\{\{ if \$labels\.(\w+) \}\}(.*?)\{\{ end \}\}/g, (_, name: string, inner: string) =>
    label(name) === '' ? '' : inner,
  );
  return conditional.replace(/\{\{ (.*?) \}\}/g, (_, action: string) => {
    let match = /^\$labels\.(\w+)$/.exec(action);
    if (match !== null) return label(match[1]!);
    match = /^printf "([^"]*)" \$values\.A\.Value$/.exec(action);
    if (match !== null) return fixed(match[1]!, value);
    match = /^reReplaceAll "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)" \(printf "([^"]*)" \$values\.A\.Value\)$/.exec(action);
    if (match !== null) return fixed(match[3]!, value).replace(new RegExp(goString(match[1]!), 'g'), goString(match[2]!));
    throw new Error(`template action {{ ${action} }} not emulated`);
  });
}
