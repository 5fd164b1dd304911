import fc from 'fast-check';
import { TrieRouter } from 'hono/router/trie-router';
import { describe, expect, it } from 'vitest';
import { HEALTH_ROUTES } from './routes/health.js';
import { INGEST_ROUTES } from './routes/ingest.js';
import { FLEET_REPORT_PATH } from './routes/fleet.js';
import { StaticPathRouter } from './static-path-router.js';

type Handler = () => string;

/** The gateway's routes as the app adds them: a middleware on every path, each endpoint's method, then any method (405). */
function routes(): [method: string, path: string, handler: Handler][] {
  const all: [string, string, Handler][] = [['ALL', '*', () => 'every path']];
  for (const { path } of INGEST_ROUTES) all.push(['POST', path, () => `post ${path}`], ['ALL', path, () => `405 ${path}`]);
  for (const path of HEALTH_ROUTES) all.push(['GET', path, () => `get ${path}`], ['ALL', path, () => `405 ${path}`]);
  all.push(['POST', FLEET_REPORT_PATH, () => 'fleet'], ['GET', '/console/', () => 'console']);
  return all;
}

function routers() {
  const trie = new TrieRouter<Handler>();
  const remembering = new StaticPathRouter(new TrieRouter<Handler>());
  for (const [method, path, handler] of routes()) {
    trie.add(method, path, handler);
    remembering.add(method, path, handler);
  }
  return { trie, remembering };
}

const registered = [...new Set(routes().map(([, path]) => path))];

/**
 * Any path a client may send: segments of the characters a path may hold as they are (RFC 3986)
 * and of percent-encoded bytes. (fast-check's webPath() builds a table of every code point on its
 * first use, seconds for this file.)
 */
const pathCharacter = fc.oneof(
  fc.constantFrom(..."abcxyzABCXYZ0189-._~!$&'()*+,;=:@"),
  fc.integer({ min: 0, max: 255 }).map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`),
);
const clientPath = fc
  .array(
    fc.array(pathCharacter, { maxLength: 8 }).map((characters) => characters.join('')),
    { maxLength: 5 },
  )
  .map((segments) => (segments.length === 0 ? '' : `/${segments.join('/')}`));

/** Registered paths, the same with parameters filled in or a segment more, and any path at all. */
const anyPath = fc.oneof(
  fc.constantFrom(...registered),
  fc
    .tuple(fc.constantFrom(...registered), fc.stringMatching(/^[a-z0-9%._-]{0,12}$/))
    .map(([path, segment]) => path.replaceAll(/:[a-z]+/g, segment || 'x')),
  fc.tuple(fc.constantFrom(...registered), fc.constantFrom('/', '/batch', '/x/y', '//')).map(([path, tail]) => path + tail),
  clientPath,
);
const anyMethod = fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'HEAD', 'QUERY', 'FOO');

describe('StaticPathRouter', () => {
  it('matches every method and path as the router it wraps, asked once or many times', () => {
    const { trie, remembering } = routers();
    fc.assert(
      fc.property(fc.array(fc.tuple(anyMethod, anyPath), { minLength: 1, maxLength: 20 }), (requests) => {
        for (const [method, path] of [...requests, ...requests]) expect(remembering.match(method, path)).toEqual(trie.match(method, path));
      }),
    );
  });

  it('searches the router it wraps once for a path registered without parameters, every time for other paths', () => {
    const inner = new TrieRouter<Handler>();
    let searches = 0;
    const match = inner.match.bind(inner);
    inner.match = (method, path) => {
      searches += 1;
      return match(method, path);
    };
    const remembering = new StaticPathRouter(inner);
    for (const [method, path, handler] of routes()) remembering.add(method, path, handler);
    for (let i = 0; i < 100; i++) remembering.match('POST', '/api/v2/ingest');
    expect(searches).toBe(1);
    for (let i = 0; i < 100; i++) remembering.match('POST', `/api/v2/ingest/harbor-${i}`);
    expect(searches).toBe(101);
    // A method any client may make up is not remembered, so it cannot grow the memory.
    for (let i = 0; i < 10; i++) remembering.match(`M${i}`, '/api/v2/ingest');
    expect(searches).toBe(111);
  });

  it('sees a route added after a path was matched', () => {
    const remembering = new StaticPathRouter(new TrieRouter<Handler>());
    const first: Handler = () => 'first';
    const later: Handler = () => 'later';
    remembering.add('POST', '/api/v2/ingest', first);
    expect(remembering.match('POST', '/api/v2/ingest')[0].map(([handler]) => handler)).toEqual([first]);
    remembering.add('POST', '/api/v2/ingest', later);
    expect(remembering.match('POST', '/api/v2/ingest')[0].map(([handler]) => handler)).toEqual([first, later]);
  });
});
