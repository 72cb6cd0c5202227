//! The requests waiting for their answers, by id: whichever stream an answer arrives on
//! (the POST's own SSE stream, a resumed stream, the standalone GET stream), it goes to the
//! request with its id, and only to it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use maljan_mcp_proto::jsonrpc::{Reply, RequestId};
use tokio::sync::oneshot;

use crate::HttpError;

/// What a waiting request is given: its reply, or why its answer was unusable.
pub(crate) type Answer = Result<Reply, HttpError>;

/// The table of requests waiting for an answer.
#[derive(Debug, Default, Clone)]
pub(crate) struct WaitingRequests {
    table: Arc<Mutex<HashMap<RequestId, oneshot::Sender<Answer>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What [`WaitingRequests::deliver`] did with an answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// The request with its id had it.
    Delivered,
    /// No request with its id waits (a late answer, or an id never sent): dropped.
    Unmatched,
}

impl WaitingRequests {
    /// Registers `id`; the returned wait removes it again when dropped, answered or not.
    pub(crate) fn register(&self, id: RequestId) -> Waiting {
        let (tx, rx) = oneshot::channel();
        lock(&self.table).insert(id.clone(), tx);
        Waiting {
            id,
            rx,
            table: self.clone(),
        }
    }

    /// Gives `answer` to the request waiting under `id`, if one does.
    pub(crate) fn deliver(&self, id: &RequestId, answer: Answer) -> Delivery {
        match lock(&self.table).remove(id) {
            Some(tx) => {
                // The request may be dropping its wait at this moment: then nobody reads
                // the answer, as for a late one.
                let _ = tx.send(answer);
                Delivery::Delivered
            }
            None => Delivery::Unmatched,
        }
    }

    /// Forgets every request: their waits end as closed.
    pub(crate) fn close(&self) {
        lock(&self.table).clear();
    }
}

/// One request's wait for its answer.
#[derive(Debug)]
pub(crate) struct Waiting {
    id: RequestId,
    rx: oneshot::Receiver<Answer>,
    table: WaitingRequests,
}

/// How a wait ended.
#[derive(Debug)]
pub(crate) enum WaitEnd {
    /// The answer came.
    Answered(Answer),
    /// The connection was closed first.
    Closed,
}

impl Waiting {
    /// The answer, if it came already.
    pub(crate) fn try_take(&mut self) -> Option<WaitEnd> {
        match self.rx.try_recv() {
            Ok(answer) => Some(WaitEnd::Answered(answer)),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(WaitEnd::Closed),
        }
    }

    /// Waits for the answer.
    pub(crate) async fn answer(&mut self) -> WaitEnd {
        match (&mut self.rx).await {
            Ok(answer) => WaitEnd::Answered(answer),
            Err(_) => WaitEnd::Closed,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        lock(&self.table.table).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn reply(text: &str) -> Answer {
        let json = serde_json::to_string(text).unwrap();
        Ok(Reply::Result(RawValue::from_string(json).unwrap().into()))
    }

    fn text(end: Option<WaitEnd>) -> String {
        match end {
            Some(WaitEnd::Answered(Ok(Reply::Result(r)))) => r.get().to_owned(),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn an_answer_goes_to_the_request_with_its_id_only() {
        let waiting = WaitingRequests::default();
        let mut one = waiting.register(RequestId::Integer(1));
        let mut two = waiting.register(RequestId::Integer(2));
        assert_eq!(
            waiting.deliver(&RequestId::Integer(2), reply("2")),
            Delivery::Delivered
        );
        assert!(one.try_take().is_none());
        assert_eq!(text(two.try_take()), "\"2\"");
        assert_eq!(
            waiting.deliver(&RequestId::Integer(2), reply("again")),
            Delivery::Unmatched,
            "a second answer to the same id is never given to anyone"
        );
        assert_eq!(
            waiting.deliver(&RequestId::String("1".into()), reply("x")),
            Delivery::Unmatched,
            "the string \"1\" is not the integer 1"
        );
        assert!(one.try_take().is_none());
    }

    #[test]
    fn a_dropped_wait_is_forgotten_and_its_late_answer_unmatched() {
        let waiting = WaitingRequests::default();
        let wait = waiting.register(RequestId::Integer(7));
        drop(wait);
        assert_eq!(
            waiting.deliver(&RequestId::Integer(7), reply("late")),
            Delivery::Unmatched
        );
    }

    #[test]
    fn closing_ends_every_wait() {
        let waiting = WaitingRequests::default();
        let mut wait = waiting.register(RequestId::Integer(1));
        waiting.close();
        assert!(matches!(wait.try_take(), Some(WaitEnd::Closed)));
    }
}
