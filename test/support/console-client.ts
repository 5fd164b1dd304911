import { Agent, fetch as undiciFetch } from 'undici';

/** Accepts the gateway's self-signed certificate, as a technician's browser does once told to. */
const insecure = new Agent({ connect: { rejectUnauthorized: false } });

export interface ConsolePage {
  status: number;
  headers: Headers;
  html: string;
  location: string | null;
}

/**
 * A browser's part in the console's forms, without the browser: a cookie jar, the tokens of the
 * last page, and the Origin a browser would send. For the protocol tests; test/console-browser
 * drives a real Chromium.
 */
export class ConsoleClient {
  readonly cookies = new Map<string, string>();
  /** The `_csrf` of the last page read (undefined before a logged-in page). */
  csrf: string | undefined;
  loginToken: string | undefined;

  constructor(
    readonly base: string,
    readonly origin: string | null = base,
  ) {}

  async request(
    path: string,
    init: { method?: string; form?: [string, string][]; headers?: Record<string, string> } = {},
  ): Promise<ConsolePage> {
    const headers: Record<string, string> = { ...init.headers };
    if (this.cookies.size > 0) headers['cookie'] = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (init.form !== undefined) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      if (this.origin !== null) headers['origin'] ??= this.origin;
    }
    const response = await undiciFetch(`${this.base}${path}`, {
      method: init.method ?? (init.form === undefined ? 'GET' : 'POST'),
      headers,
      body: init.form === undefined ? undefined : new URLSearchParams(init.form).toString(),
      redirect: 'manual',
      dispatcher: insecure,
    });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const [name, value] = pair!.split('=');
      if (value === '' || /Max-Age=0/i.test(cookie)) this.cookies.delete(name!);
      else this.cookies.set(name!, value!);
    }
    const html = await response.text();
    this.csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? this.csrf;
    this.loginToken = /name="_login" value="([^"]+)"/.exec(html)?.[1] ?? this.loginToken;
    return { status: response.status, headers: response.headers as unknown as Headers, html, location: response.headers.get('location') };
  }

  /** Logs in as a person would: a login answered 429 is sent again once its `Retry-After` has passed. */
  async login(password: string): Promise<ConsolePage> {
    await this.request('/console/login');
    for (;;) {
      const answer = await this.submitLogin(password);
      if (answer.status !== 429) return answer;
      await new Promise((resolve) => setTimeout(resolve, Number(answer.headers.get('retry-after')) * 1000));
    }
  }

  /** The login form with the token of the login page last fetched. */
  submitLogin(password: string, next = '/console/'): Promise<ConsolePage> {
    return this.request('/console/login', {
      form: [
        ['_login', this.loginToken ?? ''],
        ['password', password],
        ['next', next],
      ],
    });
  }

  /** A form of the console, with this session's token unless `csrf` says otherwise. */
  post(path: string, fields: [string, string][], csrf: string | null | undefined = this.csrf): Promise<ConsolePage> {
    return this.request(path, { form: csrf === null ? fields : [['_csrf', csrf ?? ''], ...fields] });
  }
}

export { insecure as insecureAgent };
