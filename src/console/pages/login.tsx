import type { FC } from 'hono/jsx';
import { FormError, Section, SubmitButton } from './layout.js';

export interface LoginModel {
  /** The login form's token, also in a cookie (double submit): a login cannot be forged from another site. */
  loginToken: string;
  /** Where to go after logging in (a console path). */
  next: string;
  failed: boolean;
  /** Set when the attempt came before its turn: the password was not looked at. */
  throttled?: { retryAfterS: number; reason: 'host' | 'everyone' } | undefined;
  /** False while no console password is set: the page says how to set one instead of asking for it. */
  configured: boolean;
}

export const Login: FC<LoginModel> = ({ loginToken, next, failed, throttled, configured }) =>
  configured ? (
    <Section name="login" heading="Log in" class="card">
      {failed ? (
        <FormError id="login-error">That is not the console password. (A device key is not the console password.)</FormError>
      ) : null}
      {throttled !== undefined ? (
        <FormError id="login-throttled">
          {throttled.reason === 'host'
            ? 'Too many login attempts from this address'
            : 'Too many login attempts from the network as a whole'}
          : the password was not checked. Try again in {throttled.retryAfterS} s.
          {throttled.reason === 'everyone' ? ' From the gateway itself (loopback) this bound does not apply.' : ''}
        </FormError>
      ) : null}
      <form method="post" action="/console/login" class="stack">
        <input type="hidden" name="_login" value={loginToken} />
        <input type="hidden" name="next" value={next} />
        <div>
          <label for="password">Console password</label>
          <input type="password" id="password" name="password" required autocomplete="current-password" />
        </div>
        <SubmitButton>Log in</SubmitButton>
      </form>
    </Section>
  ) : (
    <Section name="closed" heading="The console has no password yet" class="card">
      <p>
        Set <code>CONSOLE_PASSWORD_FILE</code> (or the systemd credential <code>console_password</code>, or <code>CONSOLE_PASSWORD</code>)
        and restart the gateway. On the appliance it is in <code>harbor.conf</code>. Device keys never open the console.
      </p>
    </Section>
  );
