// The Kafka client library's own code, the oracle the Kafka sink's encoders and failure handling are
// held to, taken from the library's modules one by one: its index loads every client and compiles
// their option schemas as it loads, seconds for each test file that imports it. The paths are the
// package's files (its `exports` name the index alone); their types are the package's own.
export { jsCRC32C } from '../../node_modules/@platformatic/kafka/dist/protocol/crc32c.js';
export { murmur2 } from '../../node_modules/@platformatic/kafka/dist/protocol/murmur2.js';
export {
  MultipleErrors,
  NetworkError,
  ProtocolError,
  ResponseError,
  UnsupportedCompressionError,
} from '../../node_modules/@platformatic/kafka/dist/errors.js';
export { compressionsAlgorithms } from '../../node_modules/@platformatic/kafka/dist/protocol/compression.js';
export { Reader } from '../../node_modules/@platformatic/kafka/dist/protocol/reader.js';
export { readRecordsBatch } from '../../node_modules/@platformatic/kafka/dist/protocol/records.js';
export * as produceV7 from '../../node_modules/@platformatic/kafka/dist/apis/producer/produce-v7.js';
export * as produceV8 from '../../node_modules/@platformatic/kafka/dist/apis/producer/produce-v8.js';
export * as produceV9 from '../../node_modules/@platformatic/kafka/dist/apis/producer/produce-v9.js';
export * as produceV10 from '../../node_modules/@platformatic/kafka/dist/apis/producer/produce-v10.js';
export * as produceV11 from '../../node_modules/@platformatic/kafka/dist/apis/producer/produce-v11.js';
