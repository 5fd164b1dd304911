// Where `npm run local` tells a person to open the console: the gateway's HOST as a browser on
// this machine reaches it (every address and loopback: localhost), an IPv6 address in brackets.

/** @param {string} host */
const isLoopback = (host) => host === 'localhost' || host === '::1' || host.startsWith('127.');

/**
 * @param {string} host the gateway's HOST
 * @param {string | number} httpsPort
 * @returns {string}
 */
export function consoleUrl(host, httpsPort) {
  const local = isLoopback(host) || host === '0.0.0.0' || host === '::';
  const name = local ? 'localhost' : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `https://${name}:${httpsPort}/console/`;
}
