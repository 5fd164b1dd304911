/** Fields every record carries that a person at a terminal does not need on each line. */
const BASE_FIELDS = new Set(['level', 'time', 'pid', 'hostname', 'service', 'msg']);
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: '', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/**
 * A JSON log record as a person reads it on a terminal: the time, the level unless it is info, and
 * the message, which says in words what happened (the start line says where everything is). A
 * warning or worse also carries its other fields, and an error's stack follows on its own lines.
 * What is not JSON passes as it is.
 */
export function readableLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  if (typeof record !== 'object' || record === null) return json;
  const level = typeof record['level'] === 'number' ? record['level'] : 30;
  const time = typeof record['time'] === 'string' ? record['time'].slice(11, 19) : '';
  const words = [time, LEVELS[level] ?? String(level), typeof record['msg'] === 'string' ? record['msg'] : ''].filter((w) => w !== '');
  if (level < 40) return `${words.join(' ')}\n`;
  const fields: Record<string, unknown> = {};
  let stack = '';
  for (const [name, value] of Object.entries(record)) {
    if (BASE_FIELDS.has(name)) continue;
    const { stack: errorStack, ...error } = (name === 'err' && typeof value === 'object' && value !== null ? value : {}) as {
      stack?: unknown;
    };
    if (typeof errorStack === 'string') {
      stack = `\n${errorStack}`;
      fields[name] = error;
    } else fields[name] = value;
  }
  const rest = Object.keys(fields).length === 0 ? '' : ` ${JSON.stringify(fields)}`;
  return `${words.join(' ')}${rest}${stack}\n`;
}
