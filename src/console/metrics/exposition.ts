type Labels = Record<string, string>;

/** A label value in the text format: backslash, double quote and line feed escaped. */
const escapeLabel = (value: string): string => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const escapeHelp = (value: string): string => value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

const formatValue = (value: number): string =>
  Number.isNaN(value) ? 'NaN' : value === Infinity ? '+Inf' : value === -Infinity ? '-Inf' : String(value);

/**
 * Writes the Prometheus text exposition format (version 0.0.4), the format Telegraf, Vector, Fluent
 * Bit and Prometheus itself scrape: one HELP and TYPE per family, then its samples.
 */
export class Exposition {
  readonly #lines: string[] = [];

  family(name: string, type: 'counter' | 'gauge', help: string, samples: readonly (readonly [Labels | undefined, number])[]): this {
    if (samples.length === 0) return this;
    this.#lines.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      const text =
        labels === undefined || Object.keys(labels).length === 0
          ? ''
          : `{${Object.entries(labels)
              .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
              .join(',')}}`;
      this.#lines.push(`${name}${text} ${formatValue(value)}`);
    }
    return this;
  }

  /** One family with a single unlabelled sample. */
  one(name: string, type: 'counter' | 'gauge', help: string, value: number): this {
    return this.family(name, type, help, [[undefined, value]]);
  }

  text(): string {
    return `${this.#lines.join('\n')}\n`;
  }
}

export const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';
