//! One transcript record: a direction, a message (or a note), extra keys.

use serde_json::{Map, Value};

use crate::error::ShimError;
use crate::jsonrpc::Message;

/// Which way a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Client → server.
    C2s,
    /// Server → client.
    S2c,
}

impl Dir {
    /// The wire spelling (`c2s` / `s2c`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dir::C2s => "c2s",
            Dir::S2c => "s2c",
        }
    }

    /// The opposite direction (who answers a request sent this way).
    pub fn other(self) -> Dir {
        match self {
            Dir::C2s => Dir::S2c,
            Dir::S2c => Dir::C2s,
        }
    }
}

/// What is wrong with a record.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum RecordError {
    /// The record is not a JSON object.
    #[error("a record must be a JSON object")]
    NotObject,
    /// `dir` is missing or not `c2s`/`s2c`.
    #[error("\"dir\" must be \"c2s\" or \"s2c\", got {0}")]
    Dir(String),
    /// Neither `msg` nor a `note` is present.
    #[error("missing \"msg\"")]
    MissingMsg,
    /// `msg` is not a JSON-RPC message MCP allows.
    #[error("\"msg\" is not a JSON-RPC message: {0}")]
    BadMsg(ShimError),
}

/// A transcript record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Direction.
    pub dir: Dir,
    /// The message; `None` for a note-only record.
    pub msg: Option<Message>,
    /// Why the record looks the way it does (translations only).
    pub note: Option<String>,
    /// For a note-only record: the message that has no counterpart.
    pub original: Option<Value>,
    /// Other keys, kept verbatim and in order.
    pub extra: Map<String, Value>,
}

impl Record {
    /// A plain message record.
    pub fn message(dir: Dir, msg: Message) -> Record {
        Record {
            dir,
            msg: Some(msg),
            note: None,
            original: None,
            extra: Map::new(),
        }
    }

    /// Reads a record. A record without `msg` is accepted only if it is a
    /// note (the output of an earlier translation), so outputs can be fed back.
    pub fn from_value(v: &Value) -> Result<Record, RecordError> {
        let obj = v.as_object().ok_or(RecordError::NotObject)?;
        let dir = match obj.get("dir") {
            Some(Value::String(s)) if s == "c2s" => Dir::C2s,
            Some(Value::String(s)) if s == "s2c" => Dir::S2c,
            Some(other) => return Err(RecordError::Dir(other.to_string())),
            None => return Err(RecordError::Dir("nothing".into())),
        };
        let note = obj.get("note").and_then(Value::as_str).map(str::to_owned);
        let msg = match obj.get("msg") {
            Some(m) => Some(Message::from_value(m.clone()).map_err(RecordError::BadMsg)?),
            None if note.is_some() => None,
            None => return Err(RecordError::MissingMsg),
        };
        let extra = obj
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "dir" | "msg" | "note" | "original"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Record {
            dir,
            msg,
            note,
            original: obj.get("original").cloned(),
            extra,
        })
    }

    /// The wire form: extra keys first (they are usually timestamps), then
    /// `dir`, `msg`, `note`, `original`.
    pub fn to_value(&self) -> Value {
        let mut m = self.extra.clone();
        m.insert("dir".into(), Value::from(self.dir.as_str()));
        if let Some(msg) = &self.msg {
            m.insert("msg".into(), msg.to_value());
        }
        if let Some(n) = &self.note {
            m.insert("note".into(), Value::from(n.clone()));
        }
        if let Some(o) = &self.original {
            m.insert("original".into(), o.clone());
        }
        Value::Object(m)
    }

    /// An output record derived from `self` (extra keys carried over).
    pub(super) fn derive(&self, dir: Dir, msg: Message, note: Option<String>) -> Record {
        Record {
            dir,
            msg: Some(msg),
            note,
            original: None,
            extra: self.extra.clone(),
        }
    }

    /// A note-only record standing for `self`'s message.
    pub(super) fn noted(&self, note: impl Into<String>) -> Record {
        Record {
            dir: self.dir,
            msg: None,
            note: Some(note.into()),
            original: self.msg.as_ref().map(Message::to_value),
            extra: self.extra.clone(),
        }
    }
}

impl Record {
    /// The record with its message unchanged (same shape in both revisions).
    pub(super) fn clone_plain(&self) -> Record {
        Record {
            note: None,
            original: None,
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_round_trip_and_keep_extra_keys() {
        let v = json!({"t": 5, "dir": "c2s", "msg": {"jsonrpc":"2.0","id":1,"method":"ping"}});
        let r = Record::from_value(&v).unwrap();
        assert_eq!(r.extra["t"], 5);
        assert_eq!(r.to_value(), v);
    }

    #[test]
    fn bad_records_say_why() {
        assert_eq!(Record::from_value(&json!([1])), Err(RecordError::NotObject));
        assert!(matches!(
            Record::from_value(&json!({"dir":"up","msg":{}})),
            Err(RecordError::Dir(_))
        ));
        assert_eq!(
            Record::from_value(&json!({"dir":"s2c"})),
            Err(RecordError::MissingMsg)
        );
        assert!(matches!(
            Record::from_value(&json!({"dir":"s2c","msg":{"id":1}})),
            Err(RecordError::BadMsg(_))
        ));
        let note = json!({"dir":"s2c","note":"n","original":{"x":1}});
        assert_eq!(Record::from_value(&note).unwrap().to_value(), note);
    }
}
