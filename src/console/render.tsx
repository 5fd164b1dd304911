import type { Context } from 'hono';
import { raw } from 'hono/html';
import type { Child } from 'hono/jsx';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { Layout, type LayoutProps } from './pages/layout.js';

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
