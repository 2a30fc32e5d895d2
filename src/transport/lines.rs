//! Newline-delimited JSON-RPC framing over any async byte stream.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::error::ShimError;
use crate::jsonrpc::{self, Id, Message};

/// One thing read from a line stream.
#[derive(Debug)]
pub enum Inbound {
    /// A well-formed message.
    Message(Message),
    /// A line that is not a valid message; `id` is salvaged when possible so
    /// the peer can be answered.
    Invalid {
        /// The request id, if one could be read.
        id: Option<Id>,
        /// Why the line was refused.
        error: ShimError,
        /// The start of the offending line (at most [`EXCERPT_BYTES`],
        /// lossy UTF-8), for logs and error messages.
        excerpt: String,
        /// The line was refused for its size, not its content.
        oversized: bool,
        /// A refused line that starts as an answer (`result` or `error`):
        /// the id of the request it answers, so that request can fail now
        /// rather than wait for an answer that was dropped. Oversized, or
        /// valid JSON the parser cannot hold (nested deeper than its limit,
        /// a number beyond `f64`): the stream itself is fine.
        answer_to: Option<Id>,
    },
}

/// How much of a refused line [`Inbound::Invalid`] keeps.
pub const EXCERPT_BYTES: usize = 120;

/// The first [`EXCERPT_BYTES`] of `line` (lossy UTF-8), for messages.
pub fn excerpt(line: &[u8]) -> String {
    let cut = &line[..line.len().min(EXCERPT_BYTES)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if line.len() > EXCERPT_BYTES {
        s.push('…');
    }
    s
}

/// Reads lines until EOF, sending each parsed message to `tx`. Returns when
/// the stream ends or the receiver is gone. Lines over `max_bytes` are
/// refused (and skipped) rather than buffered without bound.
pub async fn read_lines<R: AsyncRead + Unpin>(
    reader: R,
    tx: mpsc::UnboundedSender<Inbound>,
    max_bytes: usize,
) -> std::io::Result<()> {
    let mut lines = LineReader::new(reader, max_bytes);
    while let Some(inbound) = lines.next().await? {
        if tx.send(inbound).is_err() {
            break;
        }
    }
    Ok(())
}

/// The reading half of [`read_lines`], for a caller that handles each
/// message where it is read instead of behind a channel (one task hand-off
/// less per message).
#[derive(Debug)]
pub struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    max_bytes: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Lines over `max_bytes` are refused (and skipped) rather than
    /// buffered without bound.
    pub fn new(reader: R, max_bytes: usize) -> Self {
        LineReader {
            reader: BufReader::with_capacity(64 * 1024, reader),
            line: Vec::with_capacity(4096),
            max_bytes,
        }
    }

    /// The next non-blank line, or `None` at the end of the stream.
    ///
    /// Cancel-safe: a line cut short by a dropped call is kept and finished
    /// by the next call (or handed over by [`LineReader::into_parts`]).
    pub async fn next(&mut self) -> std::io::Result<Option<Inbound>> {
        loop {
            let n = BoundedLine::new(&mut self.line, self.max_bytes)
                .read(&mut self.reader)
                .await?;
            let classified = classify(&self.line, self.max_bytes);
            self.line.clear();
            if n == 0 {
                return Ok(None);
            }
            if let Some(inbound) = classified {
                return Ok(Some(inbound));
            }
        }
    }

    /// Everything read but not yet returned (a partial line, then the rest
    /// of the buffer), and the stream to go on reading from: for a reader
    /// that moves to a thread mid-stream without losing a byte.
    pub fn into_parts(self) -> (Vec<u8>, R) {
        let mut rest = self.line;
        rest.extend_from_slice(self.reader.buffer());
        (rest, self.reader.into_inner())
    }
}

/// [`LineReader`] with plain blocking reads, for a dedicated thread; it also
/// hands out each line's bytes as read, for a relay that forwards them
/// untouched.
#[derive(Debug)]
pub struct BlockingLines<R> {
    reader: std::io::BufReader<R>,
    line: Vec<u8>,
    max_bytes: usize,
}

impl<R: std::io::Read> BlockingLines<R> {
    /// Lines over `max_bytes` are refused (and skipped) rather than
    /// buffered without bound.
    pub fn new(reader: R, max_bytes: usize) -> Self {
        BlockingLines {
            reader: std::io::BufReader::with_capacity(64 * 1024, reader),
            line: Vec::with_capacity(4096),
            max_bytes,
        }
    }

    /// The next non-blank line's bytes as read, unparsed (see
    /// [`classify`]); `None` at the end of the stream.
    pub fn next_raw(&mut self) -> std::io::Result<Option<&[u8]>> {
        loop {
            self.line.clear();
            if self.line.capacity() > 1 << 20 {
                // One huge message must not pin its buffer for the session.
                self.line = Vec::with_capacity(4096);
            }
            let n =
                BoundedLine::new(&mut self.line, self.max_bytes).read_blocking(&mut self.reader)?;
            if n == 0 {
                return Ok(None);
            }
            if !trim(&self.line).is_empty() {
                return Ok(Some(&self.line));
            }
        }
    }
}

/// What one raw line (as read, newline included) amounts to; `None` for a
/// blank line. A line longer than `max_bytes` was cut short by the reader
/// and is refused for its size.
pub fn classify(line: &[u8], max_bytes: usize) -> Option<Inbound> {
    let trimmed = trim(line);
    if trimmed.is_empty() {
        return None;
    }
    Some(if line.len() > max_bytes {
        // The reader kept the line's first `max_bytes`: enough, nearly
        // always, to find whom to answer.
        let prefix = jsonrpc::salvage_prefix(trimmed);
        let (id, answer_to) = if prefix.is_answer {
            (None, prefix.id)
        } else {
            (prefix.id, None)
        };
        Inbound::Invalid {
            id,
            error: ShimError::InvalidRequest(format!(
                "message exceeds the limit of {max_bytes} bytes"
            )),
            excerpt: excerpt(trimmed),
            oversized: true,
            answer_to,
        }
    } else {
        match Message::parse_bounded(trimmed, max_bytes) {
            Ok(m) => Inbound::Message(m),
            Err(error) => {
                // An answer whose envelope reads fine: a tool's deep tree or
                // huge number, not a broken stream.
                let prefix = jsonrpc::salvage_prefix(trimmed);
                let answer_to = prefix.is_answer.then_some(prefix.id).flatten();
                Inbound::Invalid {
                    id: jsonrpc::salvage_id(trimmed),
                    error,
                    excerpt: excerpt(trimmed),
                    oversized: false,
                    answer_to,
                }
            }
        }
    })
}

/// One line being read into `out`, at most `max` bytes of it kept: the
/// blocking and the async reader differ only in how they fill their
/// buffer, so what they do with each buffer lives here. Past `max` it
/// keeps consuming but stops storing, so an oversized line costs no
/// memory.
struct BoundedLine<'a> {
    out: &'a mut Vec<u8>,
    max: usize,
    /// Bytes consumed so far.
    total: usize,
}

impl<'a> BoundedLine<'a> {
    fn new(out: &'a mut Vec<u8>, max: usize) -> Self {
        BoundedLine { out, max, total: 0 }
    }

    /// Takes what `buf` (a reader's buffer; empty at EOF) holds of the
    /// line: returns how many bytes to consume and, once the line ended
    /// (a newline, or the end of the stream), the bytes consumed in all
    /// (0 when the stream had already ended).
    fn take(&mut self, buf: &[u8]) -> (usize, Option<usize>) {
        if buf.is_empty() {
            return (0, Some(self.total));
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        if self.out.len() <= self.max {
            self.out.extend_from_slice(chunk);
        }
        self.total += chunk.len();
        (chunk.len(), done.then_some(self.total))
    }

    fn read_blocking<R: std::io::BufRead>(mut self, reader: &mut R) -> std::io::Result<usize> {
        loop {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let (len, ended) = self.take(buf);
            reader.consume(len);
            if let Some(total) = ended {
                return Ok(total);
            }
        }
    }

    /// Cancel-safe as far as `out` goes: what a dropped call took stays
    /// in `out`, and the next call goes on with the same line.
    async fn read<R: AsyncBufReadExt + Unpin>(mut self, reader: &mut R) -> std::io::Result<usize> {
        loop {
            let (len, ended) = self.take(reader.fill_buf().await?);
            reader.consume(len);
            if let Some(total) = ended {
                return Ok(total);
            }
        }
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &line[start..end]
}

/// Writes every message from `rx` as one line until the channel closes.
pub async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::UnboundedReceiver<Message>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    while let Some(msg) = rx.recv().await {
        buf.clear();
        msg.write_json(&mut buf);
        buf.push(b'\n');
        writer.write_all(&buf).await?;
        // Drain whatever is queued before flushing: one flush per burst.
        while let Ok(more) = rx.try_recv() {
            buf.clear();
            more.write_json(&mut buf);
            buf.push(b'\n');
            writer.write_all(&buf).await?;
        }
        writer.flush().await?;
    }
    writer.flush().await
}

/// Writes raw lines (pass-through keeps the peer's bytes untouched).
pub async fn write_raw_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) -> std::io::Result<()> {
    while let Some(mut line) = rx.recv().await {
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        writer.write_all(&line).await?;
        writer.flush().await?;
    }
    Ok(())
}

/// `line` as a whole line: with its newline, added when it was the last
/// line of a stream that ended without one.
pub fn with_newline(line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if line.ends_with(b"\n") {
        std::borrow::Cow::Borrowed(line)
    } else {
        std::borrow::Cow::Owned([line, b"\n"].concat())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_parse_and_bad_lines_are_reported_with_ids() {
        let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n{\"id\":7,\"method\":3}\nnot json\n";
        let (tx, mut rx) = mpsc::unbounded_channel();
        read_lines(input, tx, 1 << 20).await.unwrap();
        assert!(matches!(rx.recv().await, Some(Inbound::Message(_))));
        match rx.recv().await {
            Some(Inbound::Invalid { id, error, .. }) => {
                assert_eq!(id, Some(Id::Num(7)));
                assert_eq!(error.code(), -32600);
            }
            other => panic!("{other:?}"),
        }
        match rx.recv().await {
            Some(Inbound::Invalid {
                id: None,
                error,
                excerpt,
                ..
            }) => {
                assert_eq!(error.code(), -32700);
                assert_eq!(excerpt, "not json");
            }
            other => panic!("{other:?}"),
        }
        assert!(rx.recv().await.is_none());
    }

    #[tokio::test]
    async fn oversized_lines_are_refused_without_buffering() {
        let mut input = vec![b'x'; 10_000];
        input.push(b'\n');
        input.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n");
        let (tx, mut rx) = mpsc::unbounded_channel();
        read_lines(&input[..], tx, 100).await.unwrap();
        assert!(matches!(rx.recv().await, Some(Inbound::Invalid { .. })));
        assert!(matches!(rx.recv().await, Some(Inbound::Message(_))));
    }

    /// An oversized request keeps its id for the error answer; an
    /// oversized answer names the request it answers instead.
    #[tokio::test]
    async fn oversized_lines_keep_whom_to_answer() {
        let big = "x".repeat(10_000);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{{\"a\":\"{big}\"}}}}\n\
             {{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{{\"a\":\"{big}\"}}}}\n"
        );
        let (tx, mut rx) = mpsc::unbounded_channel();
        read_lines(input.as_bytes(), tx, 100).await.unwrap();
        match rx.recv().await {
            Some(Inbound::Invalid {
                id,
                oversized: true,
                answer_to: None,
                ..
            }) => {
                assert_eq!(id, Some(Id::Num(5)));
            }
            other => panic!("{other:?}"),
        }
        match rx.recv().await {
            Some(Inbound::Invalid {
                id: None,
                oversized: true,
                answer_to,
                ..
            }) => {
                assert_eq!(answer_to, Some(Id::Num(6)));
            }
            other => panic!("{other:?}"),
        }
    }
}

#[cfg(test)]
mod handover_tests {
    use super::*;

    /// A reader cancelled mid-line hands over the partial line and the
    /// buffered rest; reading on from them loses and repeats nothing.
    #[tokio::test]
    async fn into_parts_keeps_a_partial_line_and_the_buffer() {
        let (mut w, r) = tokio::io::duplex(1024);
        let mut lines = LineReader::new(r, 1 << 20);
        w.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"a\"}\n{\"jsonrpc\":\"2.0\",")
            .await
            .unwrap();
        let first = lines.next().await.unwrap();
        assert!(matches!(first, Some(Inbound::Message(m)) if m.method() == Some("a")));
        // The second line is incomplete: this read is cut short.
        let cut = tokio::time::timeout(std::time::Duration::from_millis(50), lines.next()).await;
        assert!(cut.is_err());
        let (rest, _stream) = lines.into_parts();
        assert_eq!(rest, b"{\"jsonrpc\":\"2.0\",");
        let mut whole = rest;
        whole.extend_from_slice(b"\"method\":\"b\"}\n");
        let mut blocking = BlockingLines::new(&whole[..], 1 << 20);
        let raw = blocking.next_raw().unwrap().unwrap().to_vec();
        assert_eq!(raw, whole);
        let second = classify(&raw, 1 << 20);
        assert!(matches!(second, Some(Inbound::Message(m)) if m.method() == Some("b")));
        assert!(blocking.next_raw().unwrap().is_none());
    }
}
