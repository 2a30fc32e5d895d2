//! A legacy client's `tasks/get` of a task that still runs: a poll. Its
//! record is read on the client's thread (a memory ledger answers at
//! once), and the upstream's answer is handled where it is read, as a
//! plain call's is ([`super::plain`]). A transport that answers each
//! request on its own channel (HTTP, the layer) awaits the same poll
//! instead ([`LegacySession::tasks_get`]); both judge the answer alike.
//!
//! A client polling a working task mostly hears nothing new, in the same
//! upstream answer again and again. The last such answer is remembered
//! with the record it was judged against ([`PollMemo`]): the next poll of
//! that record takes the memo along, and an answer that is the same
//! again, byte for byte but its id, is answered from it unread. Whether
//! the memo's record is still the ledger's is asked in place
//! ([`crate::ledger::TaskLedger::is_current`]): a poll that brings nothing
//! new copies no record out of the ledger, and nothing but the memo
//! crosses from the client's thread to the reader's.

use std::any::Any;
use std::sync::Arc;

use super::plain::same_request;
use super::{LegacySession, guarded, lock, log_error, panicked};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, JsonText, Reply, Request, answer_rest};
use crate::ledger::TaskRecord;
use crate::translate::raw::{Params, PlainParams, Poll};
use crate::upstream::{Answer, AnswerHandler, TaskAnswer, TextAnswer, task_of, task_of_line};
use crate::wire::modern::bare_task_answer;

const TASKS_GET: &str = "tasks/get";

impl LegacySession {
    /// A client's `tasks/get`: answered from the record when the task can
    /// change no more, else asked upstream as a callback request. An
    /// answer with news for the record (a status that changed, input
    /// asked) goes on as `tasks/get` always does, as a task.
    pub(super) fn handle_tasks_get(self: &Arc<Self>, req: Request) {
        match crate::translate::task::task_id_param(req.params.as_ref()) {
            Ok(task_id) => {
                let task_id = task_id.to_owned();
                self.handle_poll(Poll {
                    id: req.id,
                    task_id,
                });
            }
            Err(e) => {
                let outcome = Err(e.into());
                log_error(TASKS_GET, &outcome);
                self.answer_client(req.id, outcome);
            }
        }
    }

    /// A client's `tasks/get` read as a [`Poll`]
    /// ([`crate::translate::raw::client_request`]), answered as any
    /// `tasks/get` is: from the record when the task can change no more,
    /// else from the upstream's answer, read where it is read.
    pub fn handle_poll(self: &Arc<Self>, poll: Poll) {
        if let Some(memo) = self.memo_now(&poll.task_id) {
            return self.ask_upstream(poll.id, Asked::Memo(memo));
        }
        let this = self.clone();
        crate::inline::start_here(async move {
            let Poll { id, task_id } = poll;
            match this.start_poll(&task_id).await {
                PollStart::Ask(asked) => this.ask_upstream(id, asked),
                PollStart::Refresh(rec) => this.finish_tasks_get(id, rec, None),
                PollStart::Answered(outcome) => {
                    log_error(TASKS_GET, &outcome);
                    this.answer_client(id, outcome);
                }
            }
        });
    }

    /// How a poll of `task_id` goes on: asked upstream with the memo of
    /// the last poll, or with the record; or answered already.
    async fn start_poll(&self, task_id: &str) -> PollStart {
        let rec = match self.memo_of(task_id).await {
            Ok(Some(memo)) => return PollStart::Ask(Asked::Memo(memo)),
            Ok(None) => match self.record_to_poll(task_id).await {
                Ok(rec) => rec,
                Err(answered) => return PollStart::Answered(answered),
            },
            Err(e) => return PollStart::Answered(Err(e)),
        };
        match PlainParams::task_id(rec.id()) {
            Some(params) => PollStart::Ask(Asked::Record(rec, params)),
            None => PollStart::Refresh(rec),
        }
    }

    /// Asks the upstream about a polled task, its answer handled where it
    /// is read ([`TaskGetAnswer`]).
    fn ask_upstream(self: &Arc<Self>, id: Id, asked: Asked) {
        let handler = Box::new(TaskGetAnswer {
            session: self.clone(),
            id,
            asked,
        });
        self.front
            .upstream
            .request_with_callback(TASKS_GET, &self.meta(), handler);
    }

    /// [`Self::memo_of`] when the ledger can tell without waiting
    /// ([`crate::ledger::TaskLedger::is_current_now`]) that the memo is
    /// current; `None` for anything else (no memo, another task's, a
    /// changed record, a store that must be awaited, an error, a panic),
    /// which the usual way asks again and answers.
    fn memo_now(&self, task_id: &str) -> Option<Arc<PollMemo>> {
        let memo = self.last_memo_of(task_id)?;
        let now = self.front.clock.now_ms();
        let ledger = &self.front.ledger;
        let current =
            crate::inline::unless_panicked(|| ledger.is_current_now(&self.scope, &memo.rec, now))??;
        matches!(current, Ok(true)).then_some(memo)
    }

    /// The memo of the last poll, if it is of `task_id` (current or not).
    fn last_memo_of(&self, task_id: &str) -> Option<Arc<PollMemo>> {
        lock(&self.poll_memo)
            .clone()
            .filter(|memo| memo.rec.id() == task_id)
    }

    /// The memo of the last poll if it is of `task_id` and its record is
    /// still the ledger's: asked whether the record changed, the ledger
    /// copies nothing out of it.
    async fn memo_of(&self, task_id: &str) -> Result<Option<Arc<PollMemo>>, ErrorObject> {
        let Some(memo) = self.last_memo_of(task_id) else {
            return Ok(None);
        };
        let now = self.front.clock.now_ms();
        let current = self.front.ledger.is_current(&self.scope, &memo.rec, now);
        let current = async {
            current
                .await
                .map_err(|e| ErrorObject::from(ShimError::from(e)))
        };
        let current = crate::inline::or_if_panicked(current, || Err(panicked(TASKS_GET))).await;
        Ok(current?.then_some(memo))
    }

    /// The record of a task to ask upstream about; the answer itself when
    /// the record is the answer (a task that can change no more, or one
    /// the shim minted), or there is no record to read.
    async fn record_to_poll(
        &self,
        task_id: &str,
    ) -> Result<TaskRecord, Result<Reply, ErrorObject>> {
        let read = self.read_record_of(task_id, false);
        match crate::inline::or_if_panicked(read, || Err(panicked(TASKS_GET))).await {
            Ok(rec) if !rec.synthetic && !rec.is_terminal() => Ok(rec),
            answered => Err(answered.map(|rec| Reply::Text(JsonText::of(&rec.task)))),
        }
    }

    /// The rest of a `tasks/get` as a task: from the upstream's `answer`,
    /// or asking the usual way without one.
    fn finish_tasks_get(
        self: &Arc<Self>,
        id: Id,
        rec: TaskRecord,
        answer: Option<Result<TaskAnswer, ShimError>>,
    ) {
        let this = self.clone();
        crate::inline::start_here(async move {
            let running = this.running.clone();
            let session = this.clone();
            let rest = async move { session.refreshed_reply(rec, answer).await };
            let reply = Box::pin(guarded(TASKS_GET, rest));
            if let Some(outcome) = running.track(id.clone(), reply).await {
                this.answer_client(id, outcome);
            }
        });
    }

    /// Answers the client's `tasks/get` `id` as `judged` says.
    fn finish_judged(self: &Arc<Self>, id: Id, judged: Judged) {
        match judged {
            Judged::Answer(text) => self.answer_client(id, Ok(Reply::Text(text))),
            Judged::Read(read) => {
                let (rec, answer) = *read;
                self.finish_tasks_get(id, rec, Some(answer));
            }
        }
    }

    /// The upstream's answer to a poll that `asked`, as its line
    /// ([`Self::judge_line`]) or read, or the error that ended it.
    fn judge(&self, asked: Asked, answer: Result<Answer<'_>, ShimError>) -> Judged {
        let answer = match answer {
            Ok(Answer::Line(line)) => return self.judge_line(asked, line),
            Ok(Answer::Read(read)) => task_of(read),
            Err(e) => Err(e),
        };
        self.judge_task(asked.into_record(), answer)
    }

    /// A poll's answer `line`: the memo's answer when it is the memo's
    /// line again; judged on the line, nothing copied out of it, when its
    /// task is bare, and remembered when it tells nothing new; read as a
    /// task otherwise.
    fn judge_line(&self, asked: Asked, line: &str) -> Judged {
        if let Asked::Memo(memo) = &asked
            && memo.is_answered_by(line)
        {
            return Judged::Answer(memo.text.clone());
        }
        let rec = asked.into_record();
        if let Some(seen) = bare_task_answer(line)
            && self.bare_task_tells_nothing_new(&rec, &seen)
        {
            let text = JsonText::of(&rec.task);
            if let Some(memo) = PollMemo::new(rec, line, text.clone()) {
                *lock(&self.poll_memo) = Some(Arc::new(memo));
            }
            return Judged::Answer(text);
        }
        self.judge_task(rec, task_of_line(line))
    }

    /// A poll's answer read as a task: the record is the client's answer
    /// when the task tells nothing new; else the answer goes on as
    /// `tasks/get` always goes.
    fn judge_task(&self, rec: TaskRecord, answer: Result<TaskAnswer, ShimError>) -> Judged {
        if let Ok(Ok(d)) = &answer
            && self.tells_nothing_new(&rec, d)
        {
            return Judged::Answer(JsonText::of(&rec.task));
        }
        Judged::Read(Box::new((rec, answer)))
    }

    /// A client's `tasks/get` answered to the caller, for a transport
    /// that answers each request on its own channel (HTTP, the layer):
    /// the poll of [`Self::handle_poll`], its upstream request awaited
    /// here ([`crate::upstream::ModernUpstream::request_text`]) and its
    /// answer judged the same way ([`Self::judge`]).
    pub(super) async fn tasks_get(self: &Arc<Self>, req: &Request) -> Result<Reply, ErrorObject> {
        let task_id = crate::translate::task::task_id_param(req.params.as_ref())?;
        let asked = match self.start_poll(task_id).await {
            PollStart::Ask(asked) => asked,
            PollStart::Refresh(rec) => return self.refreshed_reply(rec, None).await,
            PollStart::Answered(outcome) => return outcome,
        };
        let meta = self.meta();
        let answer = self
            .front
            .upstream
            .request_text(TASKS_GET, asked.params(), &meta);
        let line;
        let answer = match answer.await {
            Some(Ok(TextAnswer::Line(text))) => {
                line = text;
                Ok(Answer::Line(&line))
            }
            Some(Ok(TextAnswer::Read(read))) => Ok(Answer::Read(read)),
            Some(Err(e)) => Err(e),
            // This upstream reads no answer as text: it reads the task.
            None => return self.refreshed_reply(asked.into_record(), None).await,
        };
        match self.judge(asked, answer) {
            Judged::Answer(text) => Ok(Reply::Text(text)),
            Judged::Read(read) => {
                let (rec, answer) = *read;
                self.refreshed_reply(rec, Some(answer)).await
            }
        }
    }

    /// The rest of a `tasks/get` as a task, as the caller's answer: from
    /// the upstream's `answer`, or asking the usual way without one.
    async fn refreshed_reply(
        self: &Arc<Self>,
        rec: TaskRecord,
        answer: Option<Result<TaskAnswer, ShimError>>,
    ) -> Result<Reply, ErrorObject> {
        let rec = match answer {
            Some(answer) => Box::pin(self.refreshed(rec, answer)).await?,
            None => self.refresh(rec).await?,
        };
        Ok(Reply::Text(JsonText::of(&rec.task)))
    }
}

/// How a poll goes on once its memo or record is read.
enum PollStart {
    /// Asked upstream with what was read.
    Ask(Asked),
    /// Asked the usual way, as a task: a record whose id does not go as
    /// text params ([`PlainParams::task_id`]).
    Refresh(TaskRecord),
    /// Answered already: by the record (a task that can change no more,
    /// or one the shim minted), or with the error reading it.
    Answered(Result<Reply, ErrorObject>),
}

/// What a poll's answer comes to.
enum Judged {
    /// It told nothing new: the client's answer.
    Answer(JsonText),
    /// The record, and the answer read as a task, to go on as `tasks/get`
    /// always goes ([`LegacySession::refreshed`]). Boxed: it is the rare
    /// outcome (news), and the common one then moves a word, not a record.
    Read(Box<(TaskRecord, Result<TaskAnswer, ShimError>)>),
}

/// The last upstream answer to a `tasks/get` that told a session nothing
/// new, the record it was judged against, and the client's answer.
/// Whether an answer tells nothing new depends only on the answer and the
/// record ([`LegacySession::tells_nothing_new`]): the same answer to a
/// poll of the same record gets the same verdict, and the same text. One
/// per session: a client polling several tasks in turn reads each answer.
#[derive(Debug)]
pub(super) struct PollMemo {
    /// The record the answer was judged against.
    rec: TaskRecord,
    /// The upstream request's params for its task.
    params: PlainParams,
    /// The upstream's answer after its id ([`answer_rest`]).
    answer: Box<str>,
    /// The client's answer: the record's task.
    text: JsonText,
}

impl PollMemo {
    /// The memo of `line`, an answer that told `rec` nothing new, and of
    /// `text`, the client's answer; `None` for a line of another shape
    /// than [`answer_rest`] reads.
    fn new(rec: TaskRecord, line: &str, text: JsonText) -> Option<PollMemo> {
        let answer = answer_rest(line)?;
        Some(PollMemo {
            params: PlainParams::task_id(rec.id())?,
            answer: answer.into(),
            rec,
            text,
        })
    }

    /// Whether `line` is the remembered answer again (to any id).
    fn is_answered_by(&self, line: &str) -> bool {
        answer_rest(line).is_some_and(|answer| *self.answer == *answer)
    }
}

/// What a poll asked with.
// Boxed with its handler already: boxing the record too would be one more
// allocation made on the client's thread and freed on the reader's.
#[allow(clippy::large_enum_variant)]
enum Asked {
    /// The memo of the record read (the record itself left behind).
    Memo(Arc<PollMemo>),
    /// The record read, with the upstream request's params.
    Record(TaskRecord, PlainParams),
}

/// A client's `tasks/get` waiting on the upstream's.
struct TaskGetAnswer {
    session: Arc<LegacySession>,
    id: Id,
    asked: Asked,
}

impl Asked {
    /// The upstream request's params.
    fn params(&self) -> Params<'_> {
        match self {
            Asked::Memo(memo) => Params::Text(&memo.params),
            Asked::Record(_, params) => Params::Text(params),
        }
    }

    /// The record as read before asking.
    fn into_record(self) -> TaskRecord {
        match self {
            Asked::Memo(memo) => memo.rec.clone(),
            Asked::Record(rec, _) => rec,
        }
    }
}

impl AnswerHandler for TaskGetAnswer {
    fn params(&self) -> Params<'_> {
        self.asked.params()
    }

    fn answers(&self, client: &dyn Any, id: &Id) -> bool {
        same_request(client, id, &self.session, &self.id)
    }

    fn answered(self: Box<Self>, answer: Result<Answer<'_>, ShimError>) {
        let TaskGetAnswer { session, id, asked } = *self;
        let judged = session.judge(asked, answer);
        session.finish_judged(id, judged);
    }

    fn not_sent(self: Box<Self>) {
        let TaskGetAnswer { session, id, asked } = *self;
        session.finish_tasks_get(id, asked.into_record(), None);
    }
}

impl std::fmt::Debug for TaskGetAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskGetAnswer")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
