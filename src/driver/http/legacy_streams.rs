//! Which stream of a 2025-11-25 HTTP session each engine message goes on.
//!
//! The engine names each message's [`Route`]; this places it on one of
//! the session's open streams, the moment it is sent:
//! - an answer: the POST that asked;
//! - a question about a task: the SSE stream of a pending `tasks/result`
//!   for that task, else the GET stream, else held until one of them
//!   opens;
//! - a question asked during a call: that call's stream, else the newest
//!   call still streaming, else the GET stream;
//! - progress for a request: that request's stream while it is open;
//! - the withdrawal of a question: the stream that carried the question;
//! - the rest, and what its stream can no longer take: the GET stream, or
//!   a bounded backlog until one opens.
//!
//! A question no stream of the session can carry (a JSON-only client with
//! no GET stream) is handed back, to be refused for the client.

use std::collections::{HashMap, VecDeque};

use tokio::sync::mpsc;

use crate::bridge::Route;
use crate::jsonrpc::{Id, Message, Request};

/// Messages kept for a GET stream that is not open yet.
const BACKLOG: usize = 1000;

/// One stream of the session toward the client.
pub(super) type Tx = mpsc::UnboundedSender<Message>;

/// The open streams of one session, and the questions they carried.
#[derive(Debug, Default)]
pub(super) struct Streams {
    /// The SSE stream of each streamed request (`tools/call`,
    /// `tasks/result`), by its id.
    by_id: HashMap<Id, Tx>,
    /// The stream of a pending `tasks/result`, by task.
    by_task: HashMap<String, Tx>,
    /// Streamed requests other than `tasks/result`, oldest first.
    calls: Vec<(Id, Tx)>,
    get_stream: Option<Tx>,
    backlog: VecDeque<Message>,
    /// Questions sent about each task on a `tasks/result` stream and not
    /// yet answered: a new `tasks/result` stream for the task gets them
    /// again, since the stream that carried them may have been closed by
    /// the client before they were read. Those sent on the GET stream are
    /// not here: each question reaches the client once.
    asked: HashMap<String, Vec<Message>>,
    /// Questions about each task that no stream could carry yet (no
    /// `tasks/result` stream of the task, no GET stream): the first of a
    /// GET stream or a `tasks/result` stream of the task to open takes them.
    held: HashMap<String, Vec<Message>>,
    /// The call stream each question outside a task went on, while it is
    /// unanswered: its withdrawal follows it there.
    placed: HashMap<Id, Tx>,
    /// `tasks/result`s answered as JSON (no stream for questions) now
    /// waiting, by task.
    json_waits: HashMap<String, usize>,
}

fn open(tx: &Tx) -> bool {
    !tx.is_closed()
}

impl Streams {
    /// Places `msg`, bound for `route`. Gives back a question no stream of
    /// the session can carry, for the caller to refuse (outside the lock).
    pub(super) fn place(&mut self, route: Route, msg: Message) -> Option<Request> {
        match route {
            Route::Answer(id) => {
                self.answer(&id, msg);
                None
            }
            Route::Task(task) => self.task_question(task, msg),
            Route::During(id) if matches!(msg, Message::Request(_)) => {
                self.call_question(Some(&id), msg)
            }
            Route::During(id) => {
                let stream = self.by_id.get(&id).filter(|tx| open(tx)).cloned();
                self.deliver(stream, msg, false)
            }
            Route::Withdrawal(question) => {
                if self.unhold(&question) {
                    // Withdrawn before any stream carried it: the client
                    // never saw the question, nor hears of it now.
                    return None;
                }
                let stream = self.withdrawal_stream(&question);
                self.deliver(stream, msg, false)
            }
            Route::Session if matches!(msg, Message::Request(_)) => self.call_question(None, msg),
            Route::Session => self.deliver(None, msg, false),
        }
    }

    /// The answer to a request: its own stream, or nowhere.
    fn answer(&mut self, id: &Id, msg: Message) {
        let stream = self.by_id.remove(id);
        self.calls.retain(|(cid, _)| cid != id);
        self.by_task.retain(|_, tx| open(tx));
        if stream.is_some_and(|tx| tx.send(msg).is_ok()) {
            return;
        }
        // The 2025-11-25 transport puts no answer on the GET stream (only
        // a resumed stream may carry one): the stream of the request it
        // answers is gone, closed by the client.
        tracing::info!(%id, "an answer whose request's stream is closed; dropped");
    }

    /// A question tagged with `task`.
    fn task_question(&mut self, task: String, msg: Message) -> Option<Request> {
        let stream = self.by_task.get(&task).filter(|tx| open(tx)).cloned();
        let no_get_stream = !self.get_stream.as_ref().is_some_and(open);
        // Only JSON-only `tasks/result`s wait on the task: none of them
        // can carry it, and a stream opened later would find it asked.
        let nowhere =
            stream.is_none() && self.json_waits.get(&task).is_some_and(|n| *n > 0) && no_get_stream;
        if stream.is_some() {
            self.asked.entry(task).or_default().push(msg.clone());
        } else if no_get_stream && !nowhere {
            // Not the backlog: a question sent on the GET stream is not
            // asked again on a `tasks/result` stream, and this one must
            // reach the client once, by whichever opens first.
            self.held.entry(task).or_default().push(msg);
            return None;
        }
        self.deliver(stream, msg, nowhere)
    }

    /// A question outside a task, asked `during` a call (if the engine
    /// knows which): that call's stream; one the engine could not place,
    /// or whose call streams nothing, goes to the newest call.
    fn call_question(&mut self, during: Option<&Id>, msg: Message) -> Option<Request> {
        let stream = during
            .and_then(|call| self.by_id.get(call).cloned())
            .or_else(|| self.calls.last().map(|(_, tx)| tx.clone()));
        let nowhere =
            stream.is_none() && during.is_some() && !self.get_stream.as_ref().is_some_and(open);
        if let (Some(tx), Some(id)) = (&stream, msg.id()) {
            self.placed.insert(id.clone(), tx.clone());
        }
        self.deliver(stream, msg, nowhere)
    }

    /// Sends `msg` on `stream`, or, when that is gone, on the GET stream
    /// (the backlog until one opens); a question with `nowhere` else to go
    /// is handed back instead.
    fn deliver(&mut self, stream: Option<Tx>, msg: Message, nowhere: bool) -> Option<Request> {
        let msg = match stream {
            Some(tx) => match tx.send(msg) {
                Ok(()) => return None,
                Err(e) => e.0,
            },
            None => msg,
        };
        if nowhere && let Message::Request(q) = msg {
            // The backlog waits for a GET stream; a client that takes only
            // JSON and opened none would leave the call hanging until the
            // request timeout (a `tasks/result` until the task's ttl).
            return Some(q);
        }
        match &self.get_stream {
            Some(tx) if open(tx) => {
                let _ = tx.send(msg);
            }
            _ => {
                if self.backlog.len() == BACKLOG {
                    self.backlog.pop_front();
                }
                self.backlog.push_back(msg);
            }
        }
        None
    }

    /// Forgets a held question (see [`Streams::held`]) the engine has
    /// withdrawn; true if it was one.
    fn unhold(&mut self, question: &Id) -> bool {
        let mut found = false;
        self.held.retain(|_, held| {
            let before = held.len();
            held.retain(|q| q.id() != Some(question));
            found |= held.len() != before;
            !held.is_empty()
        });
        found
    }

    /// The stream that carried `question`, if still open: its withdrawal
    /// goes there. A withdrawn task question is not asked again on a
    /// later `tasks/result` stream.
    fn withdrawal_stream(&mut self, question: &Id) -> Option<Tx> {
        let mut task = None;
        self.asked.retain(|t, asked| {
            let before = asked.len();
            asked.retain(|q| q.id() != Some(question));
            if asked.len() != before {
                task = Some(t.clone());
            }
            !asked.is_empty()
        });
        let placed = self.placed.remove(question);
        let stream = match task {
            Some(task) => self.by_task.get(&task).cloned(),
            None => placed,
        };
        stream.filter(open)
    }

    /// The client answered question `id`: it need not be asked again.
    pub(super) fn answered(&mut self, id: &Id) {
        self.asked.retain(|_, asked| {
            asked.retain(|q| q.id() != Some(id));
            !asked.is_empty()
        });
        self.held.retain(|_, held| {
            held.retain(|q| q.id() != Some(id));
            !held.is_empty()
        });
        self.placed.remove(id);
    }

    /// Opens `tx` as the stream of call `id` (a streamed request other
    /// than `tasks/result`).
    pub(super) fn open_call(&mut self, id: &Id, tx: &Tx) {
        self.by_id.insert(id.clone(), tx.clone());
        self.calls.push((id.clone(), tx.clone()));
    }

    /// Opens `tx` as the stream of `tasks/result` `id`, waiting on `task`
    /// (if it names one): it takes the task's held questions, and asks
    /// again those its task's earlier streams carried.
    pub(super) fn open_task_result(&mut self, id: &Id, task: Option<&str>, tx: &Tx) {
        self.by_id.insert(id.clone(), tx.clone());
        let Some(task) = task else {
            return;
        };
        self.by_task.insert(task.to_owned(), tx.clone());
        // Held questions go on this stream now, and from then on are asked
        // again like those it carries itself.
        let held = self.held.remove(task).unwrap_or_default();
        let asked = self.asked.entry(task.to_owned()).or_default();
        asked.extend(held);
        for q in asked.iter() {
            let _ = tx.send(q.clone());
        }
    }

    /// Forgets stream `tx` of request `id`: answered, or its POST dropped.
    pub(super) fn close_request(&mut self, id: &Id, tx: &Tx) {
        if self.by_id.get(id).is_some_and(|t| t.same_channel(tx)) {
            self.by_id.remove(id);
        }
        self.calls.retain(|(_, t)| !t.same_channel(tx));
        self.by_task.retain(|_, t| !t.same_channel(tx) && open(t));
        self.placed.retain(|_, t| !t.same_channel(tx));
    }

    /// Forgets the `tasks/result` streams that have ended.
    pub(super) fn forget_closed(&mut self) {
        self.by_task.retain(|_, tx| open(tx));
    }

    /// Opens `tx` as the GET stream: the backlog and the held questions
    /// go on it first, once.
    pub(super) fn open_get(&mut self, tx: Tx) {
        for m in self.backlog.drain(..) {
            let _ = tx.send(m);
        }
        for (_, held) in self.held.drain() {
            for q in held {
                let _ = tx.send(q);
            }
        }
        self.get_stream = Some(tx);
    }

    /// A JSON-only `tasks/result` of `task` starts waiting. Gives back the
    /// questions about the task no stream can carry now, to refuse.
    pub(super) fn begin_json_wait(&mut self, task: &str) -> Vec<Message> {
        *self.json_waits.entry(task.to_owned()).or_default() += 1;
        let no_stream = !self.get_stream.as_ref().is_some_and(open)
            && !self.by_task.get(task).is_some_and(open);
        if !no_stream {
            return Vec::new();
        }
        let mut stranded = self.asked.remove(task).unwrap_or_default();
        stranded.extend(self.held.remove(task).unwrap_or_default());
        stranded
    }

    /// A JSON-only `tasks/result` of `task` stops waiting.
    pub(super) fn end_json_wait(&mut self, task: &str) {
        if let Some(n) = self.json_waits.get_mut(task) {
            *n -= 1;
            if *n == 0 {
                self.json_waits.remove(task);
            }
        }
    }

    /// Whether a stream is open to the client (the GET stream, an SSE
    /// answer in progress).
    pub(super) fn any_open(&self) -> bool {
        self.get_stream.as_ref().is_some_and(open)
            || self.by_id.values().any(open)
            || self.by_task.values().any(open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::sync::mpsc::UnboundedReceiver;

    fn stream() -> (Tx, UnboundedReceiver<Message>) {
        mpsc::unbounded_channel()
    }

    fn question(id: &str) -> Message {
        Message::request(
            Id::Str(id.into()),
            "elicitation/create",
            json!({"message": "?"}),
        )
    }

    fn withdrawal(id: &str) -> Message {
        crate::upstream::stream::cancel_message(&Id::Str(id.into()), "no longer needed")
    }

    fn ids(rx: &mut UnboundedReceiver<Message>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| match &m {
                Message::Request(r) => match &r.id {
                    Id::Str(q) => format!("ask {q}"),
                    Id::Num(n) => format!("ask {n}"),
                },
                Message::Notification(n) => n.method.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn call(n: i64) -> Id {
        Id::Num(n)
    }

    /// Two calls stream at once: a question asked during the older one
    /// goes on its stream, not the newest, and so does its withdrawal.
    #[test]
    fn a_question_and_its_withdrawal_stay_on_the_call_they_were_asked_for() {
        let mut s = Streams::default();
        let ((a, mut ra), (b, mut rb)) = (stream(), stream());
        s.open_call(&call(1), &a);
        s.open_call(&call(2), &b);
        assert!(s.place(Route::During(call(1)), question("q1")).is_none());
        assert!(
            s.place(Route::Withdrawal(Id::Str("q1".into())), withdrawal("q1"))
                .is_none()
        );
        assert_eq!(ids(&mut ra), ["ask q1", "notifications/cancelled"]);
        assert!(ids(&mut rb).is_empty());
    }

    /// A question about a task with no stream to carry it waits; the first
    /// `tasks/result` stream of the task takes it, and a later one (the
    /// client closed the first unread) is asked it again. The GET stream
    /// never sees it.
    #[test]
    fn a_task_question_waits_for_a_stream_of_its_task() {
        let mut s = Streams::default();
        assert!(s.place(Route::Task("t".into()), question("q1")).is_none());
        let (get, mut rget) = stream();
        let (first, mut rfirst) = stream();
        s.open_task_result(&call(1), Some("t"), &first);
        s.open_get(get);
        assert_eq!(ids(&mut rfirst), ["ask q1"]);
        drop(rfirst);
        s.close_request(&call(1), &first);
        let (again, mut ragain) = stream();
        s.open_task_result(&call(2), Some("t"), &again);
        assert_eq!(ids(&mut ragain), ["ask q1"]);
        assert!(ids(&mut rget).is_empty());
    }

    /// Withdrawn before any stream could carry it, a question is never
    /// shown: neither it nor its withdrawal reaches the GET stream.
    #[test]
    fn a_question_withdrawn_while_held_is_never_sent() {
        let mut s = Streams::default();
        s.place(Route::Task("t".into()), question("q1"));
        s.place(Route::Withdrawal(Id::Str("q1".into())), withdrawal("q1"));
        let (get, mut rget) = stream();
        s.open_get(get);
        assert!(ids(&mut rget).is_empty());
    }

    /// A JSON-only call with no GET stream open: its question has nowhere
    /// to go and is handed back to be refused; progress for it waits for a
    /// GET stream instead.
    #[test]
    fn a_question_no_stream_can_carry_is_handed_back() {
        let mut s = Streams::default();
        let refused = s.place(Route::During(call(1)), question("q1"));
        assert_eq!(refused.map(|q| q.id), Some(Id::Str("q1".into())));
        let progress = Message::notification(
            "notifications/progress",
            json!({"progressToken": 1, "progress": 1}),
        );
        assert!(s.place(Route::During(call(1)), progress).is_none());
        let (get, mut rget) = stream();
        s.open_get(get);
        assert_eq!(ids(&mut rget), ["notifications/progress"]);
    }

    /// A call's stream once forgotten takes nothing more, though its
    /// channel is still open (its POST holds the sender while it looks at
    /// what the stream got before its answer): later questions go to the
    /// GET stream. The POST's look relies on this to lose nothing.
    #[test]
    fn a_forgotten_call_stream_takes_nothing_more() {
        let mut s = Streams::default();
        let (get, mut rget) = stream();
        s.open_get(get);
        let (a, mut ra) = stream();
        s.open_call(&call(1), &a);
        s.close_request(&call(1), &a);
        assert!(s.place(Route::Session, question("q1")).is_none());
        assert!(s.place(Route::During(call(1)), question("q2")).is_none());
        assert!(ids(&mut ra).is_empty());
        assert_eq!(ids(&mut rget), ["ask q1", "ask q2"]);
    }

    /// An answer goes to its own request's stream, never the GET stream.
    #[test]
    fn an_answer_whose_stream_is_gone_is_dropped() {
        let mut s = Streams::default();
        let (get, mut rget) = stream();
        s.open_get(get);
        s.place(
            Route::Answer(call(1)),
            Message::response(call(1), json!({})),
        );
        assert!(ids(&mut rget).is_empty());
    }
}
