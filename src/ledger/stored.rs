//! The stored form of a [`TaskRecord`], shared by the ledgers that keep
//! records outside the process ([`DiskLedger`](super::DiskLedger),
//! [`RedisLedger`](super::RedisLedger)): one JSON encoding, so the two
//! formats cannot drift apart.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Detail, LedgerError, Millis, TaskRecord};
use crate::jsonrpc::ErrorObject;
use crate::scope::Scope;
use crate::wire::legacy;
use crate::wire::modern::Payload;

/// `change` applied to a copy of `before`, with the scope and id the
/// stored indexes hang on kept as they were, and whether anything changed.
pub(super) fn apply_change(
    before: &TaskRecord,
    change: &mut dyn FnMut(&mut TaskRecord),
) -> (TaskRecord, bool) {
    let mut after = before.clone();
    change(&mut after);
    after.scope.clone_from(&before.scope);
    after.task.task_id.clone_from(&before.task.task_id);
    let changed = after != *before;
    (after, changed)
}

/// A record as stored: the [`TaskRecord`] plus its insertion sequence,
/// the scope as its key ([`Scope::key`], rebuilt on reading). Its own type
/// (not a serde derive on the engines' types) so the file format changes
/// only on purpose.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Stored {
    pub(super) seq: u64,
    pub(super) scope: String,
    task: legacy::Task,
    payload: StoredPayload,
    #[serde(default)]
    cancel_pinned: bool,
    #[serde(default)]
    synthetic: bool,
    #[serde(default)]
    pub(super) expires_at: Option<Millis>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
enum StoredPayload {
    None,
    Result(Value),
    Error(ErrorObject),
    Input(Map<String, Value>),
}

impl Stored {
    pub(super) fn new(seq: u64, r: TaskRecord) -> Stored {
        Stored {
            seq,
            scope: r.scope.into_key(),
            task: r.task,
            payload: match r.payload {
                Payload::None => StoredPayload::None,
                Payload::Result(v) => StoredPayload::Result(v),
                Payload::Error(e) => StoredPayload::Error(e),
                Payload::Input(i) => StoredPayload::Input(i),
            },
            cancel_pinned: r.cancel_pinned,
            synthetic: r.synthetic,
            expires_at: r.expires_at,
        }
    }

    pub(super) fn into_record(self) -> TaskRecord {
        TaskRecord {
            scope: Scope::from_key(&self.scope),
            task: self.task,
            payload: match self.payload {
                StoredPayload::None => Payload::None,
                StoredPayload::Result(v) => Payload::Result(v),
                StoredPayload::Error(e) => Payload::Error(e),
                StoredPayload::Input(i) => Payload::Input(i),
            },
            cancel_pinned: self.cancel_pinned,
            synthetic: self.synthetic,
            expires_at: self.expires_at,
        }
    }

    /// [`Stored::decode`] leaving the payload out (as
    /// [`Payload::None`]): serde steps over its bytes without building a
    /// value, so reading the task of a big cached result stays cheap.
    pub(super) fn decode_without_payload(bytes: &[u8]) -> Result<Stored, LedgerError> {
        /// `Stored` minus `payload`, which serde then skips as unknown.
        #[derive(Deserialize)]
        struct Head {
            seq: u64,
            scope: String,
            task: legacy::Task,
            #[serde(default)]
            cancel_pinned: bool,
            #[serde(default)]
            synthetic: bool,
            #[serde(default)]
            expires_at: Option<Millis>,
        }
        let h: Head = read_json(bytes)?;
        Ok(Stored {
            seq: h.seq,
            scope: h.scope,
            task: h.task,
            payload: StoredPayload::None,
            cancel_pinned: h.cancel_pinned,
            synthetic: h.synthetic,
            expires_at: h.expires_at,
        })
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Stored, LedgerError> {
        read_json(bytes)
    }

    /// [`Stored::decode`], or [`Stored::decode_without_payload`] for
    /// [`Detail::TaskOnly`].
    pub(super) fn decode_for(bytes: &[u8], detail: Detail) -> Result<Stored, LedgerError> {
        match detail {
            Detail::Full => Stored::decode(bytes),
            Detail::TaskOnly => Stored::decode_without_payload(bytes),
        }
    }

    pub(super) fn encode(&self) -> Result<Vec<u8>, LedgerError> {
        serde_json::to_vec(self)
            .map_err(|e| LedgerError::Storage(format!("cannot encode ledger record: {e}")))
    }

    pub(super) fn expired(&self, now: Millis) -> bool {
        super::expired(self.expires_at, now)
    }

    /// Whether the record is `scope`'s and alive at `now`: what every read
    /// for a scope asks of it.
    pub(super) fn alive_in(&self, scope: &Scope, now: Millis) -> bool {
        self.scope == scope.key() && !self.expired(now)
    }
}

/// A stored record's JSON read as `T`; unreadable bytes are a storage error.
fn read_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, LedgerError> {
    serde_json::from_slice(bytes)
        .map_err(|e| LedgerError::Storage(format!("unreadable ledger record: {e}")))
}
