import type { FC } from 'hono/jsx';
import type { DeadLetter } from '../../queue/dead-letters.js';
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
              <td>{row.reason}</td>
              <CountCell count={row.count} />
            </tr>
          ))}
        </Table>
      )}
      <p class="hint">
        A dead letter is a reading a destination refused for its content. Re-queue puts it at the end of the queue for every destination
        again (after fixing the cause); purge deletes it for good.
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
            columns={[<span class="muted">Select</span>, 'Id', 'Sink', 'Failed at', 'Reason', 'Readings (time, ship, cargo, value)']}
          >
            {letters.map((letter) => (
              <tr>
                <td>
                  <input
                    type="checkbox"
                    name="id"
                    value={String(letter.id)}
                    id={`dl-${letter.id}`}
                    aria-label={`Dead letter ${letter.id}`}
                  />
                </td>
                <td>
                  <label for={`dl-${letter.id}`}>#{letter.id}</label>
                </td>
                <td>{letter.sink}</td>
                <td>{formatTime(letter.failedMs)}</td>
                <td>{letter.reason}</td>
                <td class="mono">
                  {letter.line.split('\n').map((line, i) => (
                    <>
                      {i > 0 ? <br /> : null}
                      {line.replaceAll('\t', ' | ')}
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
