import type { FC } from 'hono/jsx';
import { CsrfField, Section } from './layout.js';

export interface ConfirmModel {
  question: string;
  detail: string;
  action: string;
  /** Hidden fields carried to the confirmed request. */
  fields: [name: string, value: string][];
  confirmLabel: string;
  cancelHref: string;
  csrf: string;
}

/** The step between a destructive button and its effect: a second, explicit request. No script needed. */
export const Confirm: FC<ConfirmModel> = ({ question, detail, action, fields, confirmLabel, cancelHref, csrf }) => (
  <Section name="confirm" heading={question}>
    <p>{detail}</p>
    <form method="post" action={action}>
      <CsrfField csrf={csrf} />
      {fields.map(([name, value]) => (
        <input type="hidden" name={name} value={value} />
      ))}
      <input type="hidden" name="confirm" value="yes" />
      <div class="actions">
        <button type="submit" class="danger">
          {confirmLabel}
        </button>
        <a href={cancelHref}>Cancel</a>
      </div>
    </form>
  </Section>
);
