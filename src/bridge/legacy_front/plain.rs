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

use std::any::Any;
use std::sync::Arc;

use super::{LegacySession, guarded, log_error, panicked};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Reply};
use crate::translate::raw::{Params, PlainCall, PlainParams, plain_answer_to_legacy};
use crate::upstream::{Answer, AnswerHandler, TextAnswer};
use crate::wire::legacy::TaskSupport;

const METHOD: &str = "tools/call";

impl LegacySession {
    /// [`Self::handle_client`] for a `tools/call` whose params stayed text
    /// ([`crate::translate::raw::client_request`]): the same answer, the same
    /// cancellation, without the params built as a tree on the way up.
    pub fn handle_plain_call(self: &Arc<Self>, call: PlainCall) {
        // A tool that always makes a task is driven by the shim.
        if self.front.policy.for_tool(&call.name) == TaskSupport::Required {
            return self.handle_client(Message::Request(call.into_request()));
        }
        // (The name is freed here, by the thread that allocated it.)
        let PlainCall { id, params, .. } = call;
        let handler = Box::new(PlainCallAnswer {
            session: self.clone(),
            id,
            params,
        });
        self.front
            .upstream
            .request_with_callback(METHOD, &self.meta(), handler);
    }

    /// Stops the request the client's `notifications/cancelled` names if
    /// it is a callback request still waiting upstream (see
    /// [`crate::upstream::ModernUpstream::abandon_for`]); false otherwise.
    pub(super) fn abandon_callback(&self, id: &Id) -> bool {
        self.front.upstream.abandon_for(self, id)
    }

    /// The call as a task of the runtime, started on this thread (see
    /// [`crate::inline::start_here`]); from its upstream answer when it
    /// has one already.
    fn start_plain_call(self: &Arc<Self>, id: Id, params: PlainParams, answer: Option<TextAnswer>) {
        let this = self.clone();
        crate::inline::start_here(async move {
            let running = this.running.clone();
            let call = this.clone().plain_call(id.clone(), params, answer);
            let reply = Box::pin(guarded(METHOD, call));
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
        id: Id,
        params: PlainParams,
        answer: Option<TextAnswer>,
    ) -> Result<Reply, ErrorObject> {
        let first = match answer {
            Some(answer) => answer.outcome()?,
            None => match self.call_plain(METHOD, Params::Text(&params)).await? {
                Reply::Tree(answer) => answer,
                text => return Ok(text),
            },
        };
        // Boxed: the state of every path of a `tools/call` would make this
        // future a few kilobytes.
        Box::pin(self.tools_call_from(params.call_request(id), Some(first))).await
    }
}

/// A plain call waiting on its upstream answer.
struct PlainCallAnswer {
    session: Arc<LegacySession>,
    id: Id,
    params: PlainParams,
}

/// Whether `session` and `id` name the client request a handler for
/// `mine` and `my_id` answers.
pub(super) fn same_request(
    client: &dyn Any,
    id: &Id,
    mine: &Arc<LegacySession>,
    my_id: &Id,
) -> bool {
    client
        .downcast_ref::<LegacySession>()
        .is_some_and(|s| std::ptr::eq(s, &**mine))
        && id == my_id
}

impl AnswerHandler for PlainCallAnswer {
    fn params(&self) -> Params<'_> {
        Params::Text(&self.params)
    }

    fn answers(&self, client: &dyn Any, id: &Id) -> bool {
        same_request(client, id, &self.session, &self.id)
    }

    fn answered(self: Box<Self>, answer: Result<Answer<'_>, ShimError>) {
        let PlainCallAnswer {
            session,
            id,
            params,
        } = *self;
        let line = match answer {
            Ok(Answer::Line(line)) => line,
            Ok(Answer::Read(read)) => {
                return session.start_plain_call(id, params, Some(TextAnswer::Read(read)));
            }
            Err(e) => {
                let outcome = Err(e.into());
                log_error(METHOD, &outcome);
                return session.answer_client(id, outcome);
            }
        };
        match crate::inline::unless_panicked(|| plain_answer_to_legacy(line, METHOD)) {
            Some(Some(legacy)) => session.answer_client(id, Ok(Reply::Text(legacy))),
            Some(None) => {
                let answer = TextAnswer::Line(line.to_owned());
                session.start_plain_call(id, params, Some(answer));
            }
            None => session.answer_client(id, Err(panicked(METHOD))),
        }
    }

    fn not_sent(self: Box<Self>) {
        let PlainCallAnswer {
            session,
            id,
            params,
        } = *self;
        session.start_plain_call(id, params, None);
    }
}

impl std::fmt::Debug for PlainCallAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainCallAnswer")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
