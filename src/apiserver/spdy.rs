//! `pods/portforward` over SPDY/3.1, as kubectl speaks it (before 1.30 only this; later
//! kubectl falls back to it when the server does not tunnel SPDY in WebSocket).
//!
//! After the `Upgrade: SPDY/3.1` handshake the client opens two streams per forwarded port
//! (SYN_STREAM frames whose zlib-compressed headers say `streamtype: error|data`, `port` and
//! `requestid`); the server answers each with SYN_REPLY, connects to the port once both streams
//! of a request are open, and pipes bytes between the data stream and the TCP connection. An
//! error (the port refused the connection) is text on the error stream. PINGs are echoed.
//!
//! Header blocks are compressed with one zlib stream per direction, primed with SPDY/3's
//! dictionary; the server does not enforce flow control on what it sends (kubectl's SPDY
//! library does not either) but grants the client's window back as it reads.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::LazyLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// The upgrade token and the port-forward stream protocol kubectl asks for.
pub const UPGRADE: &str = "SPDY/3.1";
pub const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

const DIAL_TIMEOUT: Duration = Duration::from_secs(10);
/// SPDY frames carry 24-bit lengths; nothing larger can arrive.
const MAX_FRAME: usize = (1 << 24) - 1;
/// How many streams one connection may open: two per port, and kubectl forwards a handful.
const MAX_STREAMS: usize = 256;

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const WINDOW_UPDATE: u16 = 9;
const FLAG_FIN: u8 = 0x01;

/// SPDY/3's header compression dictionary: header names and values as length-prefixed
/// strings, then common text (the protocol's draft 3, section 2.6.10.1).
static DICTIONARY: LazyLock<Vec<u8>> = LazyLock::new(|| {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TEXT: &str = concat!(
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417",
        "502504505203 Non-Authoritative Information204 No Content301 Moved Permanently",
        "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error",
        "501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct ",
        "Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,",
        "image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,",
        "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=",
        "iso-8859-1,utf-,*,enq=0.",
    );
    let mut out = Vec::new();
    for word in WORDS {
        out.extend_from_slice(&(word.len() as u32).to_be_bytes());
        out.extend_from_slice(word.as_bytes());
    }
    out.extend_from_slice(TEXT.as_bytes());
    out
});

/// Whether a request asks to upgrade to SPDY/3.1.
pub fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(UPGRADE)))
}

/// Answers the upgrade and, once the connection is SPDY, forwards the ports the client asks
/// for on `address`.
pub fn serve_port_forward(req: Request, address: IpAddr) -> Response {
    upgrade(req, PORT_FORWARD_PROTOCOL, "pods/portforward", move |io| {
        forward(io, address)
    })
}

/// Answers a request's upgrade to SPDY with `protocol`, and runs `session` on the upgraded
/// connection; `what` names it in the debug log when it ends.
fn upgrade<F, Fut>(
    mut req: Request,
    protocol: &'static str,
    what: &'static str,
    session: F,
) -> Response
where
    F: FnOnce(hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => {
                if let Err(e) = session(hyper_util::rt::TokioIo::new(upgraded)).await {
                    tracing::debug!(error = %e, "{what} over SPDY ended");
                }
            }
            Err(e) => tracing::debug!(error = %e, "{what}: the upgrade did not happen"),
        }
    });
    let mut response = (StatusCode::SWITCHING_PROTOCOLS, Body::empty()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static(UPGRADE));
    headers.insert(
        "X-Stream-Protocol-Version",
        HeaderValue::from_static(protocol),
    );
    response
}

/// The exec stream protocol served: kubelet's v4, whose error stream carries a `Status`.
pub const EXEC_PROTOCOL: &str = "v4.channel.k8s.io";

/// Answers the upgrade and runs an exec session over the SPDY connection: the client opens a
/// stream per channel (`streamtype: error|stdin|stdout|stderr|resize`); once every stream the
/// options ask for is open, the command's output goes to stdout and stderr, the stdin
/// stream's bytes to the command, and the final status to the error stream.
pub fn serve_exec(
    req: Request,
    session: super::exec::ExecSession,
    options: super::exec::ExecOptions,
) -> Response {
    upgrade(req, EXEC_PROTOCOL, "pods/exec", move |io| {
        run_exec(io, session, options)
    })
}

/// What the connection's reader tells the exec session.
enum ExecEvent {
    Opened(String, u32),
    Data(u32, Vec<u8>, bool),
    Reset(u32),
}

/// Writes what `outgoing` asks onto the connection until every sender is gone.
fn spawn_writer<W>(mut writer: W, mut outgoing: mpsc::Receiver<Out>) -> tokio::task::JoinHandle<()>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut headers = HeaderWriter::new();
        while let Some(message) = outgoing.recv().await {
            let frame = match message {
                Out::Reply(stream) => {
                    let mut payload = stream.to_be_bytes().to_vec();
                    payload.extend(headers.block(&[]));
                    control(SYN_REPLY, 0, &payload)
                }
                Out::Data(stream, bytes, fin) => {
                    data(stream, if fin { FLAG_FIN } else { 0 }, &bytes)
                }
                Out::Reset(stream) => {
                    // CANCEL: this side will not use the stream.
                    let payload = [stream.to_be_bytes(), 5u32.to_be_bytes()].concat();
                    control(RST_STREAM, 0, &payload)
                }
                Out::Frame(frame) => frame,
            };
            if writer.write_all(&frame).await.is_err() {
                break;
            }
        }
        let _ = writer.shutdown().await;
    })
}

async fn run_exec<IO>(
    io: IO,
    session: super::exec::ExecSession,
    options: super::exec::ExecOptions,
) -> Result<(), String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use super::exec::STDERR;
    let (mut reader, writer) = tokio::io::split(io);
    let (out, outgoing) = mpsc::channel::<Out>(64);
    let writing = spawn_writer(writer, outgoing);
    let (events, mut event) = mpsc::channel::<ExecEvent>(64);
    let replies = out.clone();
    // Frames are read by a task of their own: a read cut short by the output's turn would
    // lose bytes.
    let reading = tokio::spawn(async move {
        let mut headers = HeaderReader::new();
        let mut streams = 0usize;
        while let Ok(Some(frame)) = read_frame(&mut reader).await {
            let told = match frame {
                Frame::Control {
                    kind: SYN_STREAM,
                    payload,
                    ..
                } => {
                    let Some(stream) = stream_id(&payload) else {
                        break;
                    };
                    let Ok(pairs) = headers.headers(payload.get(10..).unwrap_or_default()) else {
                        break;
                    };
                    streams += 1;
                    if streams > MAX_STREAMS {
                        break;
                    }
                    let _ = replies.send(Out::Reply(stream)).await;
                    let kind = pairs
                        .into_iter()
                        .find(|(n, _)| n == "streamtype")
                        .map(|(_, v)| v)
                        .unwrap_or_default();
                    ExecEvent::Opened(kind, stream)
                }
                Frame::Control {
                    kind: PING,
                    payload,
                    ..
                } => {
                    let _ = replies.send(Out::Frame(control(PING, 0, &payload))).await;
                    continue;
                }
                Frame::Control {
                    kind: RST_STREAM,
                    payload,
                    ..
                } => match stream_id(&payload) {
                    Some(stream) => ExecEvent::Reset(stream),
                    None => continue,
                },
                Frame::Control { kind: GOAWAY, .. } => break,
                Frame::Control { .. } => continue,
                Frame::Data {
                    stream,
                    flags,
                    payload,
                } => {
                    if !payload.is_empty() {
                        let _ = replies.send(window_update(stream, payload.len())).await;
                    }
                    ExecEvent::Data(stream, payload, flags & FLAG_FIN != 0)
                }
            };
            if events.send(told).await.is_err() {
                break;
            }
        }
    });
    // Every stream the options ask for, before anything runs, as kubelet waits for them.
    let expected = 1
        + usize::from(options.stdin)
        + usize::from(options.stdout)
        + usize::from(options.stderr)
        + usize::from(options.tty);
    let mut by_kind: HashMap<String, u32> = HashMap::new();
    let opening = async {
        while by_kind.len() < expected {
            match event.recv().await {
                Some(ExecEvent::Opened(kind, stream)) => {
                    by_kind.insert(kind, stream);
                }
                Some(_) => {}
                None => return false,
            }
        }
        true
    };
    if !tokio::time::timeout(Duration::from_secs(30), opening)
        .await
        .unwrap_or(false)
    {
        reading.abort();
        return Err("the client did not open the streams it asked for".into());
    }
    let stream_of = |kind: &str| by_kind.get(kind).copied();
    let super::exec::ExecSession {
        mut stdin,
        mut output,
        resize,
        exit_code,
    } = session;
    let (stdin_stream, resize_stream) = (stream_of("stdin"), stream_of("resize"));
    loop {
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(Ok((channel, bytes))) => {
                    let kind = if channel == STDERR { "stderr" } else { "stdout" };
                    if let Some(stream) = stream_of(kind) {
                        let _ = out.send(Out::Data(stream, bytes.to_vec(), false)).await;
                    }
                }
                Some(Err(_)) | None => break,
            },
            told = event.recv() => match told {
                Some(ExecEvent::Data(stream, bytes, fin)) if Some(stream) == stdin_stream => {
                    if let Some(input) = stdin.as_mut()
                        && !bytes.is_empty()
                        && input.write_all(&bytes).await.is_err()
                    {
                        stdin = None;
                    }
                    if fin && let Some(mut input) = stdin.take() {
                        let _ = input.shutdown().await;
                    }
                }
                Some(ExecEvent::Reset(stream)) if Some(stream) == stdin_stream => {
                    if let Some(mut input) = stdin.take() {
                        let _ = input.shutdown().await;
                    }
                }
                Some(ExecEvent::Data(stream, bytes, _)) if Some(stream) == resize_stream => {
                    for line in bytes.split(|b| *b == b'\n') {
                        if let Some((width, height)) = super::exec::terminal_size(line) {
                            resize(width, height).await;
                        }
                    }
                }
                Some(_) => {}
                // The client is gone: nothing more to tell it.
                None => {
                    drop(out);
                    let _ = writing.await;
                    return Ok(());
                }
            },
        }
    }
    drop(stdin);
    let status = super::exec::final_status(&options.command, &exit_code.await);
    for kind in ["stdout", "stderr"] {
        if let Some(stream) = stream_of(kind) {
            let _ = out.send(Out::Data(stream, Vec::new(), true)).await;
        }
    }
    if let Some(stream) = stream_of("error") {
        let _ = out
            .send(Out::Data(stream, status.to_string().into_bytes(), true))
            .await;
    }
    reading.abort();
    drop(out);
    let _ = writing.await;
    Ok(())
}

/// A frame as read off the connection.
#[derive(Debug, PartialEq)]
enum Frame {
    Control {
        kind: u16,
        flags: u8,
        payload: Vec<u8>,
    },
    Data {
        stream: u32,
        flags: u8,
        payload: Vec<u8>,
    },
}

async fn read_frame(io: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Option<Frame>> {
    let mut head = [0u8; 8];
    match io.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let flags = head[4];
    let length = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
    debug_assert!(length <= MAX_FRAME);
    let mut payload = vec![0u8; length];
    io.read_exact(&mut payload).await?;
    let first = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    Ok(Some(if first & 0x8000_0000 != 0 {
        Frame::Control {
            kind: (first & 0xffff) as u16,
            flags,
            payload,
        }
    } else {
        Frame::Data {
            stream: first,
            flags,
            payload,
        }
    }))
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&(0x8003_0000u32 | u32::from(kind)).to_be_bytes());
    out.extend_from_slice(&(((flags as u32) << 24) | payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

fn data(stream: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&(((flags as u32) << 24) | payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Grants the client's window back for `read` bytes of `stream`.
fn window_update(stream: u32, read: usize) -> Out {
    let grant = [stream.to_be_bytes(), (read as u32).to_be_bytes()].concat();
    Out::Frame(control(WINDOW_UPDATE, 0, &grant))
}

fn stream_id(payload: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = payload.get(..4)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes) & 0x7fff_ffff)
}

/// Inflates header blocks: one zlib stream for the whole connection, primed with the
/// dictionary when the stream asks for it.
struct HeaderReader {
    zlib: Decompress,
}

impl HeaderReader {
    fn new() -> HeaderReader {
        HeaderReader {
            zlib: Decompress::new(true),
        }
    }

    fn inflate(&mut self, block: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(block.len() * 4 + 64);
        let mut consumed = 0;
        loop {
            if out.capacity() - out.len() < 256 {
                out.reserve(4096);
            }
            let before = self.zlib.total_in();
            let result =
                self.zlib
                    .decompress_vec(&block[consumed..], &mut out, FlushDecompress::Sync);
            consumed += (self.zlib.total_in() - before) as usize;
            match result {
                Ok(Status::StreamEnd) => return Ok(out),
                Ok(_) if consumed >= block.len() && out.capacity() > out.len() => return Ok(out),
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.zlib
                        .set_dictionary(&DICTIONARY)
                        .map_err(|e| format!("the header dictionary does not match: {e}"))?;
                }
                Err(e) => return Err(format!("a header block does not inflate: {e}")),
            }
            if out.len() > MAX_FRAME {
                return Err("a header block inflates beyond any frame's size".into());
            }
        }
    }

    /// The name/value pairs of a header block, names in lower case.
    fn headers(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, String> {
        let raw = self.inflate(block)?;
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], String> {
            let slice = raw.get(at..at + n).ok_or("a header block ends early")?;
            at += n;
            Ok(slice)
        };
        let count = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes"));
        let mut pairs = Vec::new();
        for _ in 0..count.min(1024) {
            let n = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
            let name = String::from_utf8_lossy(take(n)?).to_lowercase();
            let n = u32::from_be_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
            let value = String::from_utf8_lossy(take(n)?).into_owned();
            pairs.push((name, value));
        }
        Ok(pairs)
    }
}

/// Deflates header blocks, one zlib stream for the connection, with the dictionary.
struct HeaderWriter {
    zlib: Compress,
}

impl HeaderWriter {
    fn new() -> HeaderWriter {
        let mut zlib = Compress::new(Compression::default(), true);
        zlib.set_dictionary(&DICTIONARY)
            .expect("a fresh compressor takes a dictionary");
        HeaderWriter { zlib }
    }

    fn block(&mut self, pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut raw = (pairs.len() as u32).to_be_bytes().to_vec();
        for (name, value) in pairs {
            for part in [name, value] {
                raw.extend_from_slice(&(part.len() as u32).to_be_bytes());
                raw.extend_from_slice(part.as_bytes());
            }
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut consumed = 0;
        loop {
            out.reserve(256);
            let before = self.zlib.total_in();
            self.zlib
                .compress_vec(&raw[consumed..], &mut out, FlushCompress::Sync)
                .expect("deflating into a growing buffer works");
            consumed += (self.zlib.total_in() - before) as usize;
            // Done once all input is in and the flush left room to spare.
            if consumed == raw.len() && out.capacity() > out.len() {
                return out;
            }
        }
    }
}

/// What the connection's writer is asked to send.
enum Out {
    Reply(u32),
    Data(u32, Vec<u8>, bool),
    Reset(u32),
    Frame(Vec<u8>),
}

/// The two streams of one forwarded port, as they open.
#[derive(Default)]
struct PortRequest {
    port: Option<u16>,
    data: Option<u32>,
    error: Option<u32>,
    started: bool,
}

async fn forward<IO>(io: IO, address: IpAddr) -> Result<(), String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut reader, writer) = tokio::io::split(io);
    let (out, outgoing) = mpsc::channel::<Out>(64);
    let writing = spawn_writer(writer, outgoing);
    let mut headers = HeaderReader::new();
    let mut requests: HashMap<String, PortRequest> = HashMap::new();
    // Where the bytes of each data stream go: its port's TCP connection.
    let mut sinks: HashMap<u32, mpsc::Sender<Option<Vec<u8>>>> = HashMap::new();
    let mut streams = 0usize;
    let result = loop {
        let frame = match read_frame(&mut reader).await {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.to_string()),
        };
        match frame {
            Frame::Control {
                kind: SYN_STREAM,
                payload,
                ..
            } => {
                let Some(stream) = stream_id(&payload) else {
                    break Err("a SYN_STREAM without a stream id".into());
                };
                let pairs = headers.headers(payload.get(10..).unwrap_or_default())?;
                streams += 1;
                if streams > MAX_STREAMS {
                    break Err(format!("more than {MAX_STREAMS} streams on one connection"));
                }
                let get = |name: &str| {
                    pairs
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                };
                let _ = out.send(Out::Reply(stream)).await;
                let request_id =
                    get("requestid").unwrap_or_else(|| get("port").unwrap_or_default());
                let request = requests.entry(request_id).or_default();
                request.port = request
                    .port
                    .or_else(|| get("port").and_then(|p| p.parse().ok()));
                match get("streamtype").as_deref() {
                    Some("data") => request.data = Some(stream),
                    Some("error") => request.error = Some(stream),
                    _ => {
                        let _ = out.send(Out::Reset(stream)).await;
                        continue;
                    }
                }
                if let (Some(port), Some(data_stream), Some(error_stream), false) =
                    (request.port, request.data, request.error, request.started)
                {
                    request.started = true;
                    let (tx, rx) = mpsc::channel(16);
                    sinks.insert(data_stream, tx);
                    tokio::spawn(pump(
                        SocketAddr::new(address, port),
                        data_stream,
                        error_stream,
                        rx,
                        out.clone(),
                    ));
                }
            }
            Frame::Control {
                kind: PING,
                payload,
                ..
            } => {
                let _ = out.send(Out::Frame(control(PING, 0, &payload))).await;
            }
            Frame::Control {
                kind: RST_STREAM,
                payload,
                ..
            } => {
                if let Some(stream) = stream_id(&payload)
                    && let Some(sink) = sinks.remove(&stream)
                {
                    let _ = sink.send(None).await;
                }
            }
            Frame::Control { kind: GOAWAY, .. } => break Ok(()),
            Frame::Control { .. } => {}
            Frame::Data {
                stream,
                flags,
                payload,
            } => {
                if !payload.is_empty() {
                    let _ = out.send(window_update(stream, payload.len())).await;
                }
                if let Some(sink) = sinks.get(&stream) {
                    if !payload.is_empty() && sink.send(Some(payload)).await.is_err() {
                        sinks.remove(&stream);
                    } else if flags & FLAG_FIN != 0 {
                        let _ = sink.send(None).await;
                        sinks.remove(&stream);
                    }
                }
            }
        }
    };
    drop(sinks);
    drop(out);
    let _ = writing.await;
    result
}

/// Connects to one port and pipes its bytes to and from the data stream; a failure to connect
/// is told on the error stream.
async fn pump(
    target: SocketAddr,
    data_stream: u32,
    error_stream: u32,
    mut from_client: mpsc::Receiver<Option<Vec<u8>>>,
    out: mpsc::Sender<Out>,
) {
    let tcp = match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(target)).await {
        Ok(Ok(tcp)) => tcp,
        outcome => {
            let why = match outcome {
                Ok(Err(e)) => e.to_string(),
                _ => "timed out".into(),
            };
            let message = format!(
                "error forwarding port {} to {}: dial tcp {target}: {why}",
                target.port(),
                target.ip()
            );
            let _ = out
                .send(Out::Data(error_stream, message.into_bytes(), true))
                .await;
            let _ = out.send(Out::Data(data_stream, Vec::new(), true)).await;
            return;
        }
    };
    let (mut read, mut write) = tcp.into_split();
    // The client's bytes go to the Pod until the client closes its side...
    let from_client = tokio::spawn(async move {
        while let Some(Some(bytes)) = from_client.recv().await {
            if write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    // ...and the Pod's to the client until the Pod closes its side, which ends the request
    // for both, as kubelet closes the streams when the Pod's side is done (a client that
    // waits for the end of the answer must not wait on itself).
    let mut buffer = vec![0u8; 32 * 1024];
    loop {
        match read.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out
                    .send(Out::Data(data_stream, buffer[..n].to_vec(), false))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = out.send(Out::Data(data_stream, Vec::new(), true)).await;
    let _ = out.send(Out::Data(error_stream, Vec::new(), true)).await;
    from_client.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_spdy3s() {
        // The length and checksum every SPDY/3 implementation's dictionary has; zlib refuses
        // a header block compressed with any other.
        assert_eq!(DICTIONARY.len(), 1423);
        let adler = {
            let (mut a, mut b) = (1u32, 0u32);
            for &byte in DICTIONARY.iter() {
                a = (a + u32::from(byte)) % 65521;
                b = (b + a) % 65521;
            }
            (b << 16) | a
        };
        let mut reader = HeaderReader::new();
        let mut writer = HeaderWriter::new();
        // A block compressed with the dictionary asks for it by that checksum and inflates.
        let block = writer.block(&[("streamtype", "data"), ("port", "2379"), ("requestid", "0")]);
        assert_eq!(&block[2..6], &adler.to_be_bytes());
        assert_eq!(
            reader.headers(&block).unwrap(),
            [
                ("streamtype".to_string(), "data".to_string()),
                ("port".to_string(), "2379".to_string()),
                ("requestid".to_string(), "0".to_string()),
            ]
        );
        // The next block continues the same zlib stream.
        let next = writer.block(&[("streamtype", "error")]);
        assert_eq!(reader.headers(&next).unwrap()[0].1, "error");
    }

    #[tokio::test]
    async fn frames_round_trip() {
        let mut wire = control(PING, 0, &7u32.to_be_bytes());
        wire.extend(data(3, FLAG_FIN, b"hi"));
        let mut cursor = std::io::Cursor::new(wire);
        assert_eq!(
            read_frame(&mut cursor).await.unwrap(),
            Some(Frame::Control {
                kind: PING,
                flags: 0,
                payload: 7u32.to_be_bytes().to_vec()
            })
        );
        assert_eq!(
            read_frame(&mut cursor).await.unwrap(),
            Some(Frame::Data {
                stream: 3,
                flags: FLAG_FIN,
                payload: b"hi".to_vec()
            })
        );
        assert_eq!(read_frame(&mut cursor).await.unwrap(), None);
    }
}
