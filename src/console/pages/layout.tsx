import type { Child, FC } from 'hono/jsx';
import { ASSET_VERSION } from '../assets/assets.js';
import { formatCount } from './format.js';

export const CONSOLE_PATH = '/console';

const NAV = [
  { href: `${CONSOLE_PATH}/`, label: 'Overview', id: 'overview' },
  { href: `${CONSOLE_PATH}/devices`, label: 'Devices', id: 'devices' },
  { href: `${CONSOLE_PATH}/keys`, label: 'Keys', id: 'keys' },
  { href: `${CONSOLE_PATH}/dead-letters`, label: 'Dead letters', id: 'dead-letters' },
  { href: `${CONSOLE_PATH}/audit`, label: 'Audit', id: 'audit' },
  { href: `${CONSOLE_PATH}/settings`, label: 'Certificate and settings', id: 'settings' },
] as const;

export type PageId = (typeof NAV)[number]['id'] | 'login';

export interface LayoutProps {
  title: string;
  page: PageId;
  /** The session's form token; absent on the login page, which has no navigation. */
  csrf?: string | undefined;
  /** What the last action did, shown once above the page. */
  notice?: string | undefined;
  /** Seconds between refreshes of the page's content by the console's script; none without it. */
  refreshS?: number;
  version: string;
  children?: Child;
}

/** The frame of every page: navigation, the log-out form, one stylesheet and one deferred script, nothing inline. */
export const Layout: FC<LayoutProps> = ({ title, page, csrf, notice, refreshS, version, children }) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <meta name="referrer" content="same-origin" />
      <title>{`${title} · Harbor Gateway`}</title>
      <link rel="stylesheet" href={`${CONSOLE_PATH}/assets/console.css?v=${ASSET_VERSION}`} />
      <link rel="icon" href={`${CONSOLE_PATH}/assets/icon.svg?v=${ASSET_VERSION}`} type="image/svg+xml" />
      <script src={`${CONSOLE_PATH}/assets/console.js?v=${ASSET_VERSION}`} defer></script>
    </head>
    <body>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={`${CONSOLE_PATH}/`}>
          Harbor Gateway
        </a>
        {csrf === undefined ? null : (
          <>
            <nav aria-label="Console">
              <ul>
                {NAV.map((item) => (
                  <li>
                    <a href={item.href} aria-current={item.id === page ? 'page' : undefined}>
                      {item.label}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
            <form method="post" action={`${CONSOLE_PATH}/logout`} class="logout">
              <input type="hidden" name="_csrf" value={csrf} />
              <button type="submit" class="link">
                Log out
              </button>
            </form>
          </>
        )}
      </header>
      <main id="main" data-refresh={refreshS === undefined ? undefined : String(refreshS)}>
        <h1>{title}</h1>
        {notice === undefined ? null : (
          <p class="notice" role="status">
            {notice}
          </p>
        )}
        {children}
      </main>
      <footer class="foot">Harbor Gateway {version}</footer>
    </body>
  </html>
);

/** A form's hidden field that proves it came from this session's page. */
export const CsrfField: FC<{ csrf: string }> = ({ csrf }) => <input type="hidden" name="_csrf" value={csrf} />;

/** A form's one action: its submit button. */
export const SubmitButton: FC<{ children?: Child }> = ({ children }) => (
  <div class="actions">
    <button type="submit" class="primary">
      {children}
    </button>
  </div>
);

/** Why a form was refused, announced at once by assistive technology. */
export const FormError: FC<{ id: string; children?: Child }> = ({ id, children }) => (
  <p class="error" role="alert" id={id}>
    {children}
  </p>
);

/** A section of a page under its heading, which names it for assistive technology (`h-` and its name). */
export const Section: FC<{ name: string; heading: Child; id?: string; class?: string; children?: Child }> = (props) => (
  <section aria-labelledby={`h-${props.name}`} id={props.id} class={props.class}>
    <h2 id={`h-${props.name}`}>{props.heading}</h2>
    {props.children}
  </section>
);

/** A column of figures: its heading and its cells are aligned right. */
export const figures = (heading: string) => ({ figures: heading });

/** A column's heading: text or markup, or a column of `figures`. */
export type Column = Child | ReturnType<typeof figures>;

const isFigures = (column: Column): column is ReturnType<typeof figures> =>
  typeof column === 'object' && column !== null && 'figures' in column;

/**
 * A table under its columns' headings, its rows the children. On a phone each row becomes a card:
 * its row heading on top, each cell under the label its `data-label` gives (the column's heading).
 */
export const Table: FC<{ label: string; id?: string; columns: Column[]; children?: Child }> = ({ label, id, columns, children }) => (
  <section class="scroll" aria-label={label} tabindex={0}>
    <table id={id}>
      <thead>
        <tr>
          {columns.map((column) =>
            isFigures(column) ? (
              <th scope="col" class="num">
                {column.figures}
              </th>
            ) : (
              <th scope="col">{column}</th>
            ),
          )}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  </section>
);

/** A cell of a `figures` column: a count, its thousands grouped, under its column's heading on a phone. */
export const CountCell: FC<{ count: number; label: string }> = ({ count, label }) => (
  <td class="num" data-label={label}>
    {formatCount(count)}
  </td>
);
