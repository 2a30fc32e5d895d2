//! `demo --live`: a scripted client talks through a real bridge engine to
//! the reference server of the other revision (in process), and every
//! message on both sides of the shim is printed in order.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::bridge::BridgeConfig;
use crate::bridge::legacy_front::LegacyFront;
use crate::bridge::modern_front::ModernFront;
use crate::jsonrpc::{Id, Message};
use crate::ledger::MemoryLedger;
use crate::reference::ReferenceServer;
use crate::revision::{self, Revision};
use crate::upstream::{Upstream, channel};

/// Where a printed message travelled.
#[derive(Debug, Clone, Copy)]
enum Leg {
    ClientToShim,
    ShimToClient,
    ShimToServer,
    ServerToShim,
}

type Log = mpsc::UnboundedSender<(Leg, Message)>;

/// A live conversation: every message on both sides of the shim, in order.
pub(crate) struct Conversation {
    client: Revision,
    lines: Vec<(Leg, Message)>,
}

/// Runs the live conversation for a `client` of one revision against a
/// server of the other.
pub(crate) fn run(client: Revision) -> Result<Conversation, String> {
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let lines = rt.block_on(async move {
        let (log, mut rx) = mpsc::unbounded_channel();
        let outcome =
            tokio::time::timeout(Duration::from_secs(20), conversation(client, log)).await;
        let mut lines = Vec::new();
        while let Ok(entry) = rx.try_recv() {
            lines.push(entry);
        }
        match outcome {
            Ok(Ok(())) => Ok(lines),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the live demo did not finish within 20 s".to_owned()),
        }
    })?;
    Ok(Conversation { client, lines })
}

/// Writes `c` to `out`; an IO error is the caller's to judge (a reader
/// that stopped reading is no failure of the demo).
pub(crate) fn print(c: Conversation, out: &mut dyn Write, width: usize) -> std::io::Result<()> {
    let (client, server) = (c.client, c.client.other());
    writeln!(
        out,
        "Live: a {client} client → mcp-tasks-shim → the {server} reference server"
    )?;
    writeln!(out, "{:<18}  message", "leg")?;
    for (leg, msg) in c.lines {
        let arrow = match leg {
            Leg::ClientToShim => "client ──▶ shim  ",
            Leg::ShimToClient => "client ◀── shim  ",
            Leg::ShimToServer => "  shim ──▶ server",
            Leg::ServerToShim => "  shim ◀── server",
        };
        // The arrow column and its gap take 19 characters.
        writeln!(out, "{arrow}  {}", summary(&msg, width.saturating_sub(19)))?;
    }
    Ok(())
}

/// `head` and as much of the payload as fits in `width` characters.
fn summary(msg: &Message, width: usize) -> String {
    let head = match msg {
        Message::Request(r) => format!("{} #{}", r.method, r.id),
        Message::Notification(n) => n.method.clone(),
        Message::Response(r) => format!("result #{}", r.id),
        Message::Error(e) => format!("error #{}", e.id.as_ref().map_or("-".into(), Id::to_string)),
    };
    let body = match msg {
        Message::Request(_) | Message::Notification(_) => msg.params().cloned().unwrap_or_default(),
        Message::Response(r) => r.result.clone(),
        Message::Error(e) => serde_json::to_value(&e.error).unwrap_or_default(),
    };
    let head = format!("{head:<28} ");
    // At least a few characters of payload, on a line of their own if the
    // head is that long (the writer wraps).
    let room = width.saturating_sub(head.chars().count()).max(12);
    let text = body.to_string();
    if text.chars().count() <= room {
        return format!("{head}{text}");
    }
    let kept: String = text.chars().take(room - 1).collect();
    format!("{head}{kept}…")
}

/// Wires a reference server of `client.other()` in process behind a bridge
/// engine, tapping both legs, then plays the client's script.
async fn conversation(client: Revision, log: Log) -> Result<(), String> {
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(10));
    let (server_out, mut server_rx) = mpsc::unbounded_channel();
    let server = ReferenceServer::new(client.other(), server_out);
    let tap = log.clone();
    tokio::spawn(async move {
        while let Some(m) = server_end.from_shim.recv().await {
            let _ = tap.send((Leg::ShimToServer, m.clone()));
            server.handle(m);
        }
    });
    let tap = log.clone();
    let to_shim = server_end.to_shim.clone();
    tokio::spawn(async move {
        while let Some(m) = server_rx.recv().await {
            let _ = tap.send((Leg::ServerToShim, m.clone()));
            let _ = to_shim.send(m);
        }
    });
    let (to_client, mut client_rx) = mpsc::unbounded_channel();
    let ledger = Arc::new(MemoryLedger::default());
    let feed: Box<dyn Fn(Message) + Send + Sync> = match client {
        Revision::Legacy => {
            let discover = conn
                .request("server/discover", probe_params())
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.message)?;
            let front = LegacyFront::new(conn, ledger, BridgeConfig::default(), discover);
            let session = front.session(crate::scope::Scope::stdio(), to_client);
            front.follow(events);
            Box::new(move |m| session.handle_client(m))
        }
        Revision::Modern => {
            let front = ModernFront::new(conn, ledger, BridgeConfig::default());
            let session = front.session(crate::scope::Scope::stdio(), to_client);
            front.follow(events);
            Box::new(move |m| session.handle_client(m))
        }
    };
    let mut scripted = ScriptedClient {
        feed,
        rx: &mut client_rx,
        log,
        next: 1,
    };
    match client {
        Revision::Legacy => scripted.legacy_script().await,
        Revision::Modern => scripted.modern_script().await,
    }
}

fn probe_params() -> Value {
    revision::probe_request(
        Id::Num(0),
        &json!({"name": "mcp-tasks-shim-demo", "version": "1"}),
    )
    .params()
    .cloned()
    .unwrap_or_default()
}

/// A client that plays a fixed script and answers elicitations "accept".
struct ScriptedClient<'a> {
    feed: Box<dyn Fn(Message) + Send + Sync>,
    rx: &'a mut mpsc::UnboundedReceiver<Message>,
    log: Log,
    next: i64,
}

impl ScriptedClient<'_> {
    /// Sends a request and waits for its answer, answering any elicitation
    /// the shim sends meanwhile.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = Id::Num(self.next);
        self.next += 1;
        self.send(Message::request(id.clone(), method, params));
        while let Some(m) = self.rx.recv().await {
            let _ = self.log.send((Leg::ShimToClient, m.clone()));
            match m {
                Message::Response(r) if r.id == id => return Ok(r.result),
                Message::Error(e) if e.id.as_ref() == Some(&id) => {
                    return Err(format!("{method} failed: {}", e.error.message));
                }
                Message::Request(r) if r.method == "elicitation/create" => {
                    let answer = json!({"action": "accept", "content": {"confirm": true}});
                    self.send(Message::response(r.id, answer));
                }
                _ => {}
            }
        }
        Err("the shim went away".into())
    }

    fn send(&self, m: Message) {
        let _ = self.log.send((Leg::ClientToShim, m.clone()));
        (self.feed)(m);
    }

    async fn legacy_script(&mut self) -> Result<(), String> {
        self.call(
            "initialize",
            json!({
                "protocolVersion": revision::LEGACY_VERSION,
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "demo-legacy-client", "version": "1"}
            }),
        )
        .await?;
        self.send(Message::notification(
            "notifications/initialized",
            json!({}),
        ));
        self.call("tools/list", json!({})).await?;
        let created = self
            .call(
                "tools/call",
                json!({"name": "confirm_delete",
                "arguments": {"filename": "notes.txt"}, "task": {"ttl": 60000}}),
            )
            .await?;
        let task_id = created["task"]["taskId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        self.call("tasks/get", json!({"taskId": task_id})).await?;
        self.call("tasks/result", json!({"taskId": task_id}))
            .await?;
        self.call("tasks/list", json!({})).await?;
        Ok(())
    }

    async fn modern_script(&mut self) -> Result<(), String> {
        let meta = json!({
            revision::META_PROTOCOL_VERSION: revision::MODERN_VERSION,
            revision::META_CLIENT_CAPABILITIES: {
                "elicitation": {"form": {}},
                "extensions": {revision::TASKS_EXTENSION: {}}
            },
            revision::META_CLIENT_INFO: {"name": "demo-modern-client", "version": "1"}
        });
        self.call("server/discover", json!({"_meta": meta})).await?;
        let created = self
            .call(
                "tools/call",
                json!({"name": "confirm_delete",
                "arguments": {"filename": "notes.txt"}, "_meta": meta}),
            )
            .await?;
        let task_id = created["taskId"].as_str().unwrap_or_default().to_owned();
        let get = json!({"taskId": task_id, "_meta": meta});
        for _ in 0..100 {
            let t = self.call("tasks/get", get.clone()).await?;
            if let Some(requests) = t.get("inputRequests").and_then(Value::as_object) {
                let answers: serde_json::Map<String, Value> = requests
                    .keys()
                    .map(|k| {
                        (
                            k.clone(),
                            json!({"action": "accept", "content": {"confirm": true}}),
                        )
                    })
                    .collect();
                self.call(
                    "tasks/update",
                    json!({"taskId": task_id,
                    "inputResponses": answers, "_meta": meta}),
                )
                .await?;
            }
            if matches!(
                t["status"].as_str(),
                Some("completed" | "failed" | "cancelled")
            ) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err("the task did not finish".into())
    }
}
