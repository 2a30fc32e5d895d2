//! The plain `tools/call` of a legacy client (see
//! [`crate::translate::raw::client_request`]): its params go upstream as
//! the client wrote them, and its answer is handled where it is read.
//!
//! No future waits for the answer: the call is a callback on its upstream
//! request ([`crate::upstream::ModernUpstream::request_with_callback`]). On a stdio session
//! the reader of the child's output turns the answer into the client's
//! and writes it, right after reading it, as a bare relay would forward
//! it: no task woken, no timer armed, no future allocated per call. An
//! answer that needs more than that (the server made a task, or asks for
//! input) continues as `tools/call` always does, as a task; an upstream
//! that cannot take callbacks gets the call that way from the start.

use std::sync::Arc;

use super::{LegacySession, guarded, log_error, panicked};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Reply};
use crate::translate::raw::{Params, PlainCall, plain_answer_to_legacy};
use crate::upstream::{AnswerHandler, TextAnswer};
use crate::wire::legacy::TaskSupport;

const METHOD: &str = "tools/call";

impl LegacySession {
    /// [`Self::handle_client`] for a `tools/call` whose params stayed text
    /// ([`crate::translate::raw::client_request`]): the same answer, the same
    /// cancellation, without the params built as a tree on the way up.
    pub fn handle_plain_call(self: &Arc<Self>, call: PlainCall) {
        // A tool that always makes a task is driven by the shim.
        if self.front.policy.for_tool(&call.name) == TaskSupport::Required {
            return self.start_plain_call(call, None);
        }
        let id = call.id.clone();
        let n = self.running.begin(id.clone());
        let handler = Box::new(PlainCallAnswer {
            session: self.clone(),
            call,
            n,
        });
        let upstream = &self.front.upstream;
        if let Some(sent) = upstream.request_with_callback(METHOD, &self.meta(), handler)
            && !self.running.sent(&id, n, upstream.clone(), sent.clone())
        {
            // Cancelled while it was being sent.
            upstream.abandon_request(&sent);
        }
    }

    /// The call as a task of the runtime, started on this thread (see
    /// [`crate::inline::start_here`]); from its upstream answer when it
    /// has one already.
    fn start_plain_call(self: &Arc<Self>, call: PlainCall, answer: Option<TextAnswer>) {
        let this = self.clone();
        crate::inline::start_here(async move {
            let id = call.id.clone();
            let running = this.running.clone();
            let reply = Box::pin(guarded(METHOD, this.clone().plain_call(call, answer)));
            if let Some(outcome) = running.track(id.clone(), reply).await {
                this.answer_client(id, outcome);
            }
        });
    }

    /// A plain call as a future: up as text; should its answer need a
    /// tree (the server made a task, or asks for input), on as
    /// `tools/call` always goes, from that answer.
    async fn plain_call(
        self: Arc<Self>,
        call: PlainCall,
        answer: Option<TextAnswer>,
    ) -> Result<Reply, ErrorObject> {
        // The other ways on are boxed: the state of every path of a
        // `tools/call` would make this future a few kilobytes.
        let first = match answer {
            Some(answer) => answer.outcome()?,
            None if self.front.policy.for_tool(&call.name) == TaskSupport::Required => {
                return Box::pin(self.request(call.into_request())).await;
            }
            None => match self.call_plain(METHOD, Params::Text(&call.params)).await? {
                Reply::Tree(answer) => answer,
                text => return Ok(text),
            },
        };
        Box::pin(self.tools_call_from(call.into_request(), Some(first))).await
    }
}

/// A plain call waiting on its upstream answer.
struct PlainCallAnswer {
    session: Arc<LegacySession>,
    call: PlainCall,
    /// Its registration among the session's running requests.
    n: u64,
}

impl AnswerHandler for PlainCallAnswer {
    fn params(&self) -> Params<'_> {
        Params::Text(&self.call.params)
    }

    fn answered(self: Box<Self>, answer: Result<TextAnswer, ShimError>) {
        let PlainCallAnswer { session, call, n } = *self;
        if !session.running.finish(&call.id, n) {
            tracing::debug!(id = %call.id, "client request cancelled; no answer");
            return;
        }
        let line = match answer {
            Ok(TextAnswer::Line(line)) => line,
            Ok(read) => return session.start_plain_call(call, Some(read)),
            Err(e) => {
                let outcome = Err(e.into());
                log_error(METHOD, &outcome);
                return session.answer_client(call.id, outcome);
            }
        };
        let legacy = std::panic::catch_unwind(|| plain_answer_to_legacy(&line, METHOD));
        match legacy {
            Ok(Some(legacy)) => session.answer_client(call.id, Ok(Reply::Text(legacy))),
            Ok(None) => session.start_plain_call(call, Some(TextAnswer::Line(line))),
            Err(_) => {
                tracing::error!("handling a client request panicked; answering it with an error");
                session.answer_client(call.id, Err(panicked(METHOD)));
            }
        }
    }

    fn not_sent(self: Box<Self>) {
        let PlainCallAnswer { session, call, n } = *self;
        if session.running.finish(&call.id, n) {
            session.start_plain_call(call, None);
        }
    }
}

impl std::fmt::Debug for PlainCallAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainCallAnswer")
            .field("id", &self.call.id)
            .finish_non_exhaustive()
    }
}
