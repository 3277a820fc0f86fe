// Package sse is the client side of the Omni-IR generate stream: it asks a
// server for a screen and feeds the text that streams back into a
// [screen.Parser] (SPEC 10.1–10.12).
//
// # The model
//
// A client POSTs {"prompt": "…"} to the server's generate endpoint, with
// the stream format its parser reads as the query parameter version
// ([Request], [Client.Generate]). A server that can't start the stream
// answers an HTTP error status with {"error": {"code", "message",
// "retryable"}}; the client then writes nothing to the parser and leaves it
// open, so the app can ask again with a new request.
//
// Otherwise the body is Server-Sent Events. A [Decoder] splits the bytes
// into events exactly as the HTML standard reads an event stream: LF, CRLF
// and CR all end a line, a leading byte order mark is dropped, a line
// starting with ":" is a comment (the server's ": ping"), several data lines
// are joined with "\n", fields other than event and data are ignored, an
// event without data is ignored, and an event whose closing blank line never
// arrives is no event. Bytes are buffered one line at a time, so the result
// never depends on how the response was split into reads, even inside a
// UTF-8 character.
//
// On those events the client keeps one rule set (SPEC 10.5–10.9):
//
//   - chunk {"text": "…"}: the text is written to the parser exactly as
//     received, in order;
//   - done {"stopReason", "model", "ms"} or error {"code", "message",
//     "retryable"}: the first of them is the terminal event and decides the
//     [Outcome]; the client stops reading there, as everything after it
//     must be ignored;
//   - anything else (an unknown name, data that isn't a JSON object, a
//     chunk whose text isn't a string) is skipped; a live {"screen"} event
//     is remembered in [Outcome.Live].
//
// However the response ends — a terminal event, the end of the body, a
// broken connection, 45 seconds without a byte, or the app cancelling the
// context — the parser is ended ([screen.Parser.End]), so references still
// pending become fallbacks instead of loading forever. A response that ends
// without a terminal event is the outcome connection_lost, retryable. A
// stream can't be resumed: retrying means a new request and a new parser.
//
// Outcomes carry stable codes: those the server sends, and the client's own
// [CodeServerError], [CodeConnectionLost], [CodeCancelled],
// [CodeEventTooLarge] and [CodeWriteFailed].
package sse
