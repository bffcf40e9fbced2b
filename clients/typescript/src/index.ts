/**
 * TypeScript client of Espalier, a typed, rooted graph database. Works in Node (≥ 20, with the
 * `ws` package) and in browsers (native WebSocket). The wire protocol is docs/protocol.md.
 */

export { Client, connect, Subscription, wsUrl, type ClientOptions } from "./client.js";
export { HttpClient, type HttpOptions } from "./http.js";
export {
  Codec,
  compress,
  compressedBy,
  decode,
  DecodeError,
  decompress,
  encode,
  zstdContentSize,
  type Compression,
  type Encoding,
  type JsonObject,
  type JsonValue,
  type ZstdCodec,
} from "./codec.js";
export * from "./errors.js";
export {
  parseEvent,
  parseReply,
  parseStatus,
  parseWelcome,
  records,
  request,
  PROTOCOL_VERSION,
  type Change,
  type Done,
  type Event,
  type Limits,
  type Node,
  type NodeData,
  type Notification,
  type Params,
  type QueryResult,
  type Reload,
  type Reply,
  type Row,
  type Status,
  type TransactionResult,
  type Welcome,
} from "./messages.js";
