//! The jobs callers hold over HTTP: a legacy-era session (named by its `Mcp-Session-Id`)
//! or a stateless caller's job (named by its job key and token). Each table is bounded
//! overall and per peer address, a job idle too long ends, and an ended job's directory is
//! removed at once.

use std::collections::HashMap;
use std::hash::Hash;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use maljan_mcp_proto::jsonrpc::RequestId;

use crate::JobDir;
use crate::job::lock;
use crate::server::InFlight;

/// One caller's job: its directory and its calls in flight.
#[derive(Debug)]
pub(super) struct Session {
    pub(super) job: Arc<JobDir>,
    pub(super) in_flight: Mutex<HashMap<RequestId, InFlight>>,
    last_used: Mutex<Instant>,
    peer: IpAddr,
}

impl Session {
    pub(super) fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    /// Whether nothing uses it: no call in flight, and no call task holding its job.
    fn unused(&self) -> bool {
        lock(&self.in_flight).is_empty() && Arc::strong_count(&self.job) == 1
    }

    /// Stops its calls and removes its job directory: a call still winding down finds it
    /// gone, and no file of the job outlives it.
    pub(super) fn end(&self) {
        for (_, call) in lock(&self.in_flight).drain() {
            call.cancel();
        }
        self.job.remove_now();
    }
}

/// Why no job could be opened for a caller.
#[derive(Debug)]
pub(super) enum OpenRefusal {
    /// The table is full.
    Full(usize),
    /// The caller's address holds its share.
    PeerFull(usize),
    /// No directory could be made.
    Io(io::Error),
}

impl std::fmt::Display for OpenRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenRefusal::Full(open) => write!(
                f,
                "{open} jobs are open, the most this server keeps; end one or try again once \
                 idle ones expire"
            ),
            OpenRefusal::PeerFull(open) => write!(
                f,
                "your address holds {open} jobs, the most one address may; end one (DELETE a \
                 session) or reuse its job key"
            ),
            OpenRefusal::Io(e) => write!(f, "no job directory could be made: {e}"),
        }
    }
}

/// The jobs of one kind, by key.
#[derive(Debug)]
pub(super) struct Sessions<K> {
    table: Mutex<HashMap<K, Arc<Session>>>,
    /// Held while jobs taken out of the table are ended, so that a job is told gone only
    /// once its directory is: a lookup that misses waits for it.
    ending: Mutex<()>,
    max: usize,
    max_per_peer: usize,
    idle: Duration,
}

impl<K: Eq + Hash + Clone> Sessions<K> {
    pub(super) fn new(max: usize, max_per_peer: usize, idle: Duration) -> Self {
        Sessions {
            table: Mutex::default(),
            ending: Mutex::default(),
            max,
            max_per_peer,
            idle,
        }
    }

    /// The job under `key`, touched; `None` when there is none, and then only once a job
    /// being ended has its directory removed.
    pub(super) fn get(&self, key: &K) -> Option<Arc<Session>> {
        let Some(session) = lock(&self.table).get(key).cloned() else {
            drop(lock(&self.ending));
            return None;
        };
        session.touch();
        Some(session)
    }

    /// The job under `key`, made for `peer` when there is none yet.
    pub(super) fn get_or_open(&self, key: K, peer: IpAddr) -> Result<Arc<Session>, OpenRefusal> {
        if let Some(session) = self.get(&key) {
            return Ok(session);
        }
        self.open(key, peer)
    }

    /// A new job under `key` for `peer`, within the table's bounds.
    pub(super) fn open(&self, key: K, peer: IpAddr) -> Result<Arc<Session>, OpenRefusal> {
        self.end_idle();
        let mut table = lock(&self.table);
        if let Some(session) = table.get(&key) {
            return Ok(session.clone());
        }
        if table.len() >= self.max {
            return Err(OpenRefusal::Full(table.len()));
        }
        let of_peer = table.values().filter(|s| s.peer == peer).count();
        if of_peer >= self.max_per_peer {
            return Err(OpenRefusal::PeerFull(of_peer));
        }
        let session = Arc::new(Session {
            job: JobDir::temporary().map_err(OpenRefusal::Io)?,
            in_flight: Mutex::default(),
            last_used: Mutex::new(Instant::now()),
            peer,
        });
        table.insert(key, session.clone());
        Ok(session)
    }

    /// Ends the job under `key`: `false` when there is none.
    pub(super) fn end(&self, key: &K) -> bool {
        let _ending = lock(&self.ending);
        let removed = lock(&self.table).remove(key);
        removed.inspect(|s| s.end()).is_some()
    }

    /// Ends the jobs idle as long as the table allows or longer, with nothing using them.
    pub(super) fn end_idle(&self) {
        let _ending = lock(&self.ending);
        let now = Instant::now();
        let expired: Vec<Arc<Session>> = {
            let mut table = lock(&self.table);
            let keys: Vec<K> = table
                .iter()
                .filter(|(_, s)| s.unused() && now.duration_since(*lock(&s.last_used)) >= self.idle)
                .map(|(key, _)| key.clone())
                .collect();
            keys.iter().filter_map(|key| table.remove(key)).collect()
        };
        for session in &expired {
            let dir = session
                .job
                .made()
                .map(|root| root.path().display().to_string());
            tracing::info!(
                job = dir.as_deref().unwrap_or("never made"),
                "an idle job expired"
            );
            session.end();
        }
    }

    /// Ends every job.
    pub(super) fn end_all(&self) {
        let _ending = lock(&self.ending);
        let all: Vec<Arc<Session>> = lock(&self.table).drain().map(|(_, s)| s).collect();
        for session in &all {
            session.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const THERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

    #[test]
    fn one_address_cannot_take_every_place() {
        let sessions = Sessions::new(4, 2, Duration::from_secs(60));
        sessions.open(1, HERE).unwrap();
        sessions.open(2, HERE).unwrap();
        assert!(matches!(
            sessions.open(3, HERE),
            Err(OpenRefusal::PeerFull(2))
        ));
        sessions.open(3, THERE).unwrap();
        sessions.open(4, THERE).unwrap();
        assert!(matches!(sessions.open(5, THERE), Err(OpenRefusal::Full(4))));
    }

    #[test]
    fn an_ended_job_takes_its_directory_with_it() {
        let sessions = Sessions::new(4, 4, Duration::from_secs(60));
        let session = sessions.open("a", HERE).unwrap();
        let dir = session.job.dir().unwrap().to_path_buf();
        assert!(dir.exists());
        assert!(sessions.end(&"a"));
        assert!(!dir.exists());
        assert!(sessions.get(&"a").is_none());
    }

    #[test]
    fn a_job_told_gone_has_its_directory_removed_whoever_ends_it() {
        // The expiry runs on a timer of its own: a caller that looks the job up meanwhile
        // must not hear "gone" while its directory is still there.
        let sessions = Sessions::new(4, 4, Duration::ZERO);
        for round in 0..50 {
            let session = sessions.open("a", HERE).unwrap();
            let dir = session.job.dir().unwrap().to_path_buf();
            for file in 0..8 {
                std::fs::write(dir.join(file.to_string()), [0u8; 4096]).unwrap();
            }
            drop(session);
            std::thread::scope(|scope| {
                scope.spawn(|| sessions.end_idle());
                while sessions.get(&"a").is_some() {
                    std::hint::spin_loop();
                }
                assert!(
                    !dir.exists(),
                    "round {round}: told gone before its directory"
                );
            });
        }
    }

    #[test]
    fn a_job_in_use_does_not_expire() {
        let sessions = Sessions::new(4, 4, Duration::ZERO);
        let session = sessions.open("a", HERE).unwrap();
        let held = session.job.clone();
        drop(session);
        sessions.end_idle();
        assert!(sessions.get(&"a").is_some());
        drop(held);
        sessions.end_idle();
        assert!(!sessions.end(&"a"), "the unused job expired");
    }
}
