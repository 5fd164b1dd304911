// Reads what the appliance needs from the unit files of systemd/: the gateway's default
// environment, its command and where each credential comes from. First boot, the emulated check
// and the image build take these from the units themselves, so the units stay the one place that
// says how the services run. Pure functions; only the unit syntax the project's units use.

/** Specifiers of a system unit that the parsed keys may hold; others are left as they are. */
const SPECIFIERS = /** @type {Record<string, string>} */ ({ S: '/var/lib', L: '/var/log', C: '/var/cache', t: '/run', '%': '%' });

/**
 * Values of one key of a unit file, in order, with continued lines joined and specifiers expanded.
 * @param {string} text
 * @param {string} key
 */
export function unitValues(text, key) {
  const joined = text.replace(/\\\n/g, ' ');
  return [...joined.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((match) => expandSpecifiers(String(match[1]).trim()));
}

const expandSpecifiers = (/** @type {string} */ value) => value.replace(/%(.)/g, (whole, letter) => SPECIFIERS[letter] ?? whole);

/**
 * Splits a value into words the way systemd does for Environment= and ExecStart=: whitespace
 * separates, double or single quotes group, a backslash escapes the next character in double quotes.
 * @param {string} value
 */
export function unitWords(value) {
  /** @type {string[]} */
  const words = [];
  let word = '';
  let inWord = false;
  /** @type {string | undefined} */
  let quote;
  for (let i = 0; i < value.length; i++) {
    const c = String(value[i]);
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < value.length) word += value[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** The Environment= assignments of a unit, later lines winning, as the service sees them. */
export function unitEnvironment(/** @type {string} */ text) {
  /** @type {Record<string, string>} */
  const env = {};
  for (const value of unitValues(text, 'Environment')) {
    for (const word of unitWords(value)) {
      const eq = word.indexOf('=');
      if (eq > 0) env[word.slice(0, eq)] = word.slice(eq + 1);
    }
  }
  return env;
}

/** The unit's LoadCredential= entries: credential name and the absolute file it is read from. */
export function unitCredentials(/** @type {string} */ text) {
  return unitValues(text, 'LoadCredential').map((value) => {
    const colon = value.indexOf(':');
    // A name alone: systemd reads it from its credential stores, the first of which is /etc/credstore.
    if (colon < 0) return { name: value, path: `/etc/credstore/${value}` };
    return { name: value.slice(0, colon), path: value.slice(colon + 1) };
  });
}

/** The command of the unit's single ExecStart=, as words; a leading prefix such as `-` or `+` is refused. */
export function unitCommand(/** @type {string} */ text) {
  const starts = unitValues(text, 'ExecStart');
  if (starts.length !== 1) throw new Error(`expected one ExecStart= in the unit, found ${starts.length}`);
  const words = unitWords(String(starts[0]));
  if (!String(words[0]).startsWith('/')) throw new Error(`ExecStart= does not start with an absolute program path: ${words[0]}`);
  return words;
}
