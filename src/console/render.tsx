import type { Context } from 'hono';
import { raw } from 'hono/html';
import type { Child } from 'hono/jsx';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { Layout, type LayoutProps, type PageId } from './pages/layout.js';

/** A whole page: the doctype, the frame and the content, with the given status. */
export function renderPage(
  c: Context,
  props: Omit<LayoutProps, 'children'>,
  content: Child,
  status: ContentfulStatusCode = 200,
): Response | Promise<Response> {
  return c.html(
    <>
      {raw('<!DOCTYPE html>')}
      <Layout {...props}>{content}</Layout>
    </>,
    status,
  );
}

/**
 * The frame of a page behind the login: its title and place in the navigation, the session's form
 * token, the version, and what the session's last action did when it was for this page (once).
 */
export function sessionFrame(
  c: Context,
  version: string,
  page: PageId,
  title: string,
  more: Pick<LayoutProps, 'notice' | 'refreshS'> = {},
): Omit<LayoutProps, 'children'> {
  const session = c.get('consoleSession');
  let notice = more.notice;
  if (session.notice?.page === page) {
    notice ??= session.notice.text;
    session.notice = undefined;
  }
  return { title, page, csrf: session.csrf, version, ...more, notice };
}

/** Tells the session's next view of `page` what its last action did: the server's word, never the URL's. */
export function flash(c: Context, page: PageId, text: string): void {
  c.get('consoleSession').notice = { page, text };
}
