//! Where a server is, as staging and taking see it.

use maljan_staging::{Reach, SampleMount};

/// Where a server is: whether it shares this host's files, and through which mount.
#[derive(Debug, Clone)]
pub(crate) struct ServerReach {
    /// The server's name.
    pub(crate) server: String,
    /// Whether the server is elsewhere (does not share this host's files).
    pub(crate) remote: bool,
    /// Where it sees the job's files, when it shares them through a mount.
    pub(crate) sample_mount: Option<SampleMount>,
}

impl ServerReach {
    /// How a file reaches the server: a local server reads the job's files where they are;
    /// one elsewhere, or behind a mount, gets them uploaded or by their mapped path.
    pub(crate) fn reach(&self) -> Reach<'_> {
        if self.remote || self.sample_mount.is_some() {
            Reach::Remote {
                sample_mount: self.sample_mount.as_ref(),
            }
        } else {
            Reach::Local
        }
    }
}
