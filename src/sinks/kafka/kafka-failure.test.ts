import {
  MultipleErrors,
  NetworkError,
  ProtocolError,
  ResponseError,
  UnsupportedCompressionError,
} from '../../../test/support/kafka-client.js';
import { describe, expect, it } from 'vitest';
import { classifyFailure } from './kafka-failure.js';

const refused = () =>
  new NetworkError('Connection to 127.0.0.1:9092 failed.', {
    cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9092'), { code: 'ECONNREFUSED' }),
  });

describe('what a failed Kafka send means', () => {
  it('is an outage while the broker cannot be reached, told by the innermost error', () => {
    const failure = classifyFailure(new MultipleErrors('produce failed 3 times.', [refused(), refused()]));
    expect(failure).toEqual({ kind: 'outage', message: 'connect ECONNREFUSED 127.0.0.1:9092' });
  });

  it('is for an operator when the broker refuses the credentials, the topic or the certificate', () => {
    expect(classifyFailure(new ProtocolError('SASL_AUTHENTICATION_FAILED')).kind).toBe('operator');
    expect(classifyFailure(new ResponseError(0, 9, { '/topics/0': 29 }, {})).kind).toBe('operator');
    expect(classifyFailure(new UnsupportedCompressionError('Cannot load snappy module')).kind).toBe('operator');
    const untrusted = new NetworkError('Connection failed.', {
      cause: Object.assign(new Error('self-signed certificate in certificate chain'), { code: 'SELF_SIGNED_CERT_IN_CHAIN' }),
    });
    // Among retried outage errors, the operator's problem wins: it is what has to be fixed.
    expect(classifyFailure(new MultipleErrors('produce failed 2 times.', [refused(), untrusted]))).toEqual({
      kind: 'operator',
      message: 'SELF_SIGNED_CERT_IN_CHAIN: self-signed certificate in certificate chain',
    });
  });

  it('is the content when the broker refuses the messages themselves', () => {
    const failure = classifyFailure(new ResponseError(0, 9, { '/responses/0/partitionResponses/0': 10 }, {}));
    expect(failure).toEqual({
      kind: 'content',
      message: 'MESSAGE_TOO_LARGE: The request included a message larger than the max message size the server will accept.',
    });
  });

  it('survives anything thrown', () => {
    expect(classifyFailure('a string')).toEqual({ kind: 'outage', message: 'a string' });
    expect(classifyFailure(undefined)).toEqual({ kind: 'outage', message: 'undefined' });
  });
});
