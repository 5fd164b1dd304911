import type { FC } from 'hono/jsx';
import type { DeadLetter } from '../../queue/dead-letters.js';
import { formatTimestampNs } from '../../reading/format-timestamp.js';
import { formatCount, formatTime } from './format.js';
import { CountCell, CsrfField, figures, Section, Table } from './layout.js';

export interface DeadLettersModel {
  total: number;
  letters: DeadLetter[];
  /** Dead letters per sink and reason, over all of them (the list may show fewer). */
  bySink: { sink: string; reason: string; count: number }[];
  /** Set when the summary covers only this many of the oldest. */
  summarised: number | undefined;
  csrf: string;
}

/** A record line with its time in UTC to the nanosecond; a line that is not one (a corrupt record) as it is. */
function readableLine(line: string): string {
  const fields = line.split('\t');
  if (fields.length === 4 && /^\d{1,19}$/.test(fields[0]!)) fields[0] = formatTimestampNs(fields[0]!);
  return fields.join(' | ');
}

export const DeadLetters: FC<DeadLettersModel> = ({ total, letters, bySink, summarised, csrf }) => (
  <>
    <Section name="by-sink" heading={<>By sink and reason{summarised === undefined ? '' : ` (the oldest ${formatCount(summarised)})`}</>}>
      {total === 0 ? (
        <p class="muted" id="no-dead-letters">
          No dead letters: every destination took every reading it was sent.
        </p>
      ) : (
        <Table label="Dead letters by sink" columns={['Sink', 'Reason', figures('Count')]}>
          {bySink.map((row) => (
            <tr>
              <th scope="row">{row.sink}</th>
              <td data-label="Reason">{row.reason}</td>
              <CountCell count={row.count} label="Count" />
            </tr>
          ))}
        </Table>
      )}
      <p class="hint" id="dead-letters-hint">
        A dead letter is a reading a destination refused for its content. Re-queue puts it at the end of the queue again, for the one
        destination that refused it (one refused at ingest, from MQTT, for every destination): fix the cause first. Purge deletes it for
        good.
      </p>
    </Section>
    {total === 0 ? null : (
      <Section
        name="letters"
        heading={letters.length < total ? `Oldest ${formatCount(letters.length)} of ${formatCount(total)}` : `All ${formatCount(total)}`}
      >
        <form method="post" action="/console/dead-letters">
          <CsrfField csrf={csrf} />
          <Table
            label="Dead letters"
            id="dead-letters"
            columns={['Dead letter', 'Sink', 'Failed at', 'Reason', 'Readings (time, ship, cargo, value)']}
          >
            {letters.map((letter) => (
              <tr>
                <td data-label="Dead letter">
                  <input
                    type="checkbox"
                    name="id"
                    value={String(letter.id)}
                    id={`dl-${letter.id}`}
                    aria-label={`Dead letter ${letter.id}`}
                  />{' '}
                  <label for={`dl-${letter.id}`}>#{letter.id}</label>
                </td>
                <td data-label="Sink">{letter.sink}</td>
                <td data-label="Failed at">{formatTime(letter.failedMs)}</td>
                <td data-label="Reason">{letter.reason}</td>
                <td class="mono" data-label="Readings">
                  {letter.line.split('\n').map((line, i) => (
                    <>
                      {i > 0 ? <br /> : null}
                      {readableLine(line)}
                    </>
                  ))}
                </td>
              </tr>
            ))}
          </Table>
          <div class="actions">
            <button type="submit" name="action" value="requeue" class="primary">
              Re-queue selected
            </button>
            <button type="submit" name="action" value="requeue-all" class="plain">
              Re-queue all {formatCount(total)}
            </button>
            <button type="submit" name="action" value="purge" class="plain">
              Purge selected…
            </button>
            <button type="submit" name="action" value="purge-all" class="plain">
              Purge all…
            </button>
          </div>
        </form>
      </Section>
    )}
  </>
);
