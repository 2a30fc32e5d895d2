//! A TCP forwarder between the shim and an HTTP upstream that can record
//! what the shim sends and misbehave on cue: cut every connection (the
//! upstream drops them), cut the one carrying a given request before it
//! reaches the upstream, or hold every byte back (the upstream hangs).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Forwards `127.0.0.1:<addr.port>` to a target; see the module docs.
pub struct Forwarder {
    /// Where the shim should connect.
    pub addr: std::net::SocketAddr,
    /// Every byte sent toward the target, in order.
    pub sent: Arc<Mutex<Vec<u8>>>,
    /// Every byte the target sent back, in order, each recorded once it
    /// was handed on to the shim.
    pub received: Arc<Mutex<Vec<u8>>>,
    cut: tokio::sync::watch::Sender<u64>,
    /// Set while bytes are held back; pumps wait on it, not on a timer.
    frozen: tokio::sync::watch::Sender<bool>,
    /// Armed by [`Forwarder::cut_next`]: the bytes whose connection is cut.
    cut_on: Arc<Mutex<Option<Vec<u8>>>>,
}

impl Forwarder {
    /// Starts forwarding to `target` (on the current runtime).
    pub async fn start(target: std::net::SocketAddr) -> Forwarder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let fwd = Forwarder {
            addr,
            sent: Arc::default(),
            received: Arc::default(),
            cut,
            frozen: tokio::sync::watch::Sender::new(false),
            cut_on: Arc::default(),
        };
        let (cuts, frozen, cut_on) = (fwd.cut.clone(), fwd.frozen.clone(), fwd.cut_on.clone());
        let (sent, received) = (fwd.sent.clone(), fwd.received.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let mut cut_rx = cuts.subscribe();
                let frozen = frozen.subscribe();
                let (sent, received) = (sent.clone(), received.clone());
                let cut_on = cut_on.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let (in_r, in_w) = inbound.into_split();
                    let (out_r, out_w) = outbound.into_split();
                    let own_cut = tokio::sync::Notify::new();
                    let outward = Record::Read(sent, &cut_on, &own_cut);
                    tokio::select! {
                        _ = async {
                            tokio::join!(
                                pump(in_r, out_w, frozen.clone(), outward),
                                pump(out_r, in_w, frozen, Record::Written(received)),
                            )
                        } => {}
                        // Dropping both sockets mid-exchange is the fault.
                        _ = cut_rx.changed() => {}
                        _ = own_cut.notified() => {}
                    }
                });
            }
        });
        fwd
    }

    /// Cuts every open connection; new ones are forwarded again.
    pub fn cut_all(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    /// Cuts the connection of the next request whose bytes hold `needle`
    /// (a method name, say), before they reach the upstream: the shim sent
    /// it and its connection closes with no answer. Once.
    pub fn cut_next(&self, needle: &str) {
        *self.cut_on.lock().unwrap() = Some(needle.as_bytes().to_vec());
    }

    /// Holds every byte back (connections stay open: a server that stopped
    /// answering) until [`Forwarder::thaw`].
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// Lets bytes through again.
    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

/// The messages a capture holds (one JSON value after another, whatever
/// surrounds them: JSON lines, or HTTP requests with their headers).
pub fn messages_in(bytes: &[u8]) -> Vec<serde_json::Value> {
    let needle = b"{\"jsonrpc\"";
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = bytes[i..].windows(needle.len()).position(|w| w == needle) {
        let start = i + at;
        let mut de =
            serde_json::Deserializer::from_slice(&bytes[start..]).into_iter::<serde_json::Value>();
        match de.next() {
            Some(Ok(v)) => {
                out.push(v);
                i = start + de.byte_offset();
            }
            _ => i = start + 1,
        }
    }
    out
}

impl Forwarder {
    /// The messages sent toward the target so far.
    pub fn sent_messages(&self) -> Vec<serde_json::Value> {
        messages_in(&self.sent.lock().unwrap())
    }
}

/// When a [`pump`] records the bytes it copies.
enum Record<'a> {
    /// As soon as they are read (what the shim sent, frozen or not); bytes
    /// holding an armed [`Forwarder::cut_next`] needle cut the connection
    /// instead of going on.
    Read(
        Arc<Mutex<Vec<u8>>>,
        &'a Mutex<Option<Vec<u8>>>,
        &'a tokio::sync::Notify,
    ),
    /// Once they are written on (what the shim was handed).
    Written(Arc<Mutex<Vec<u8>>>),
}

/// Copies `from` to `to`, recording as `record` says, holding bytes back
/// while `frozen`; passes the end of input on.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
    record: Record<'_>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Record::Read(log, armed, own_cut) = &record {
            log.lock().unwrap().extend_from_slice(&buf[..n]);
            let mut armed = armed.lock().unwrap();
            let hit = armed.as_ref().is_some_and(|needle| {
                buf[..n]
                    .windows(needle.len())
                    .any(|w| w == needle.as_slice())
            });
            if hit {
                armed.take();
                own_cut.notify_one();
                return;
            }
        }
        if frozen.wait_for(|f| !*f).await.is_err() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        if let Record::Written(log) = &record {
            log.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    }
    let _ = to.shutdown().await;
}

/// `mcp-tasks-shim http --upstream-url` through a new [`Forwarder`] to
/// `target`, with `flags` besides.
pub async fn shim_through(
    target: std::net::SocketAddr,
    flags: &[&str],
) -> (Forwarder, super::http::HttpShim) {
    let fwd = Forwarder::start(target).await;
    let url = format!("http://{}/mcp", fwd.addr);
    let mut all = vec!["--upstream-url", url.as_str()];
    all.extend_from_slice(flags);
    let shim = super::http::HttpShim::spawn(&all, &[] as &[String]);
    (fwd, shim)
}
