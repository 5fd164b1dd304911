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

/** The frame of a page behind the login: its title and place in the navigation, the session's form token, the version. */
export function sessionFrame(
  c: Context,
  version: string,
  page: PageId,
  title: string,
  more: Pick<LayoutProps, 'notice' | 'refreshS'> = {},
): Omit<LayoutProps, 'children'> {
  return { title, page, csrf: c.get('consoleSession').csrf, version, ...more };
}
