/**
 * Typed errors: one class per family of the protocol's stable error `code`
 * (docs/protocol.md, "Errors"). Every error carries `code` (match on it), `message` (for
 * people) and `where` (the request or subscription it concerns and, for syntax and type
 * errors, the line:column inside the instruction).
 */

export interface ErrorContext {
  /** The request, described for people: `execute #4 'update …'`. */
  request?: string | undefined;
  requestId?: number | undefined;
  subscription?: number | undefined;
}

// `line:column: ` at the start of a message, after an optional `syntax error: ` (how the
// instruction layer renders parse and type errors).
const POSITION = /^(?:syntax error: )?(\d+):(\d+): /;

export class EspalierError extends Error {
  readonly code: string;
  readonly detail: string;
  readonly request: string | undefined;
  readonly requestId: number | undefined;
  readonly subscription: number | undefined;
  readonly line: number | undefined;
  readonly column: number | undefined;

  constructor(code: string, message: string, context: ErrorContext = {}) {
    const m = POSITION.exec(message);
    const line = m?.[1] !== undefined ? Number(m[1]) : undefined;
    const column = m?.[2] !== undefined ? Number(m[2]) : undefined;
    const where = describeWhere(context, line, column);
    super(`error[${code}]: ${message}${where !== undefined ? ` (${where})` : ""}`);
    this.name = new.target.name;
    this.code = code;
    this.detail = message;
    this.request = context.request;
    this.requestId = context.requestId;
    this.subscription = context.subscription;
    this.line = line;
    this.column = column;
  }

  /** The place the error concerns, for people: request, subscription, line:column. */
  get where(): string | undefined {
    return describeWhere(this, this.line, this.column);
  }
}

function describeWhere(
  context: ErrorContext,
  line: number | undefined,
  column: number | undefined,
): string | undefined {
  const parts: string[] = [];
  if (context.request !== undefined) parts.push(context.request);
  else if (context.requestId !== undefined) parts.push(`request ${context.requestId}`);
  if (context.subscription !== undefined) parts.push(`subscription ${context.subscription}`);
  if (line !== undefined) parts.push(`at ${line}:${column}`);
  return parts.length > 0 ? parts.join(", ") : undefined;
}

/** The instruction failed in the engine. */
export class InstructionError extends EspalierError {}
/** `syntax`, `type`, `value`, `key_too_long`: the instruction is wrong as written. */
export class InvalidInstructionError extends InstructionError {}
/** `key_missing`: an entry named by key does not exist. */
export class NotFoundError extends InstructionError {}
/** `key_exists`, `already_in_state`, `state_not_selected`, `referenced`, `reference_unset`, `not_unique`. */
export class ConflictError extends InstructionError {}
/** `transaction`, `storage`, `storage_full`, `corrupt`, `schema`: the commit failed or the database is unusable. */
export class DatabaseError extends InstructionError {}
/** `bad_frame`, `wrong_encoding`, `bad_request`, `unknown_kind`, `unknown_subscription`. */
export class ProtocolError extends EspalierError {}
/** A bound was hit: `too_large`, `result_too_large`, `too_many_requests`, `too_many_subscriptions`,
 * `too_many_sessions`, and (subclasses) `limit` and `timeout`. */
export class LimitError extends EspalierError {}
/** `limit`: an engine bound (rows visited by a query). An instruction's failure, and a limit. */
export class EngineLimitError extends LimitError {}
/** `timeout`: a read-only request ran longer than the server's `max_query_ms`. */
export class QueryTimeoutError extends LimitError {}
/** `unauthorized` (no token, or an unknown one) or `forbidden` (the role may not). */
export class AuthError extends EspalierError {}
/** `shutting_down`: the server takes no new requests. */
export class UnavailableError extends EspalierError {}
/** `internal`, or a code this client does not know (a newer server). */
export class ServerError extends EspalierError {}
/** Raised by the client itself: `closed`, `connect_failed`, `client_timeout`, `bad_reply`,
 * `usage`, `unsupported` (zstd in a browser without a zstd codec). */
export class ClientError extends EspalierError {}

/** `connection_lost`: the session ended while the request was in flight (a write may or may not
 * have committed). `closeCode` says why: 1009 a frame over `max_frame_bytes`, 1001 shutdown. */
export class ConnectionLostError extends ClientError {
  readonly closeCode: number | undefined;
  readonly closeReason: string | undefined;

  constructor(message: string, closeCode?: number, closeReason?: string, context: ErrorContext = {}) {
    super("connection_lost", message, context);
    this.closeCode = closeCode;
    this.closeReason = closeReason;
  }
}

/** Every code of docs/protocol.md and its family. */
export const CODE_FAMILIES: Readonly<
  Record<string, new (code: string, message: string, context?: ErrorContext) => EspalierError>
> = {
  syntax: InvalidInstructionError,
  type: InvalidInstructionError,
  value: InvalidInstructionError,
  key_too_long: InvalidInstructionError,
  key_missing: NotFoundError,
  key_exists: ConflictError,
  already_in_state: ConflictError,
  state_not_selected: ConflictError,
  referenced: ConflictError,
  reference_unset: ConflictError,
  not_unique: ConflictError,
  limit: EngineLimitError,
  transaction: DatabaseError,
  storage: DatabaseError,
  storage_full: DatabaseError,
  corrupt: DatabaseError,
  schema: DatabaseError,
  bad_frame: ProtocolError,
  wrong_encoding: ProtocolError,
  bad_request: ProtocolError,
  unknown_kind: ProtocolError,
  unknown_subscription: ProtocolError,
  too_large: LimitError,
  result_too_large: LimitError,
  too_many_requests: LimitError,
  too_many_subscriptions: LimitError,
  too_many_sessions: LimitError,
  timeout: QueryTimeoutError,
  unauthorized: AuthError,
  forbidden: AuthError,
  shutting_down: UnavailableError,
  internal: ServerError,
};

/** The typed error for an `error` message's `code` (`ServerError` if the code is unknown). */
export function errorFromCode(code: string, message: string, context: ErrorContext = {}): EspalierError {
  const Family = Object.prototype.hasOwnProperty.call(CODE_FAMILIES, code) ? CODE_FAMILIES[code] : undefined;
  return Family !== undefined ? new Family(code, message, context) : new ServerError(code, message, context);
}
