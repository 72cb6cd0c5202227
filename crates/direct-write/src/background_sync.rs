//! Making a file durable on a thread of its own, behind its writes: a flush of what a
//! virtual disk's host cached can take tens of milliseconds, which the writer then does not
//! wait for.

use std::fs::File;
use std::io;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// A thread syncing a file's data each time it is asked, until it is finished.
#[derive(Debug)]
pub(crate) struct BackgroundSync {
    ask: SyncSender<()>,
    thread: JoinHandle<io::Result<()>>,
}

impl BackgroundSync {
    /// Starts the thread, on a second descriptor of `file`.
    pub(crate) fn start(file: &File) -> io::Result<Self> {
        let file = file.try_clone()?;
        // One request waiting at most: a sync yet to begin covers every write before it.
        let (ask, asked) = sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("direct-write sync".to_owned())
            .spawn(move || sync_when_asked(&file, &asked))?;
        Ok(BackgroundSync { ask, thread })
    }

    /// Asks for what was written so far to be made durable, without waiting for it.
    pub(crate) fn ask(&self) {
        // Refused when full (a sync not yet begun will cover these writes too) or when the
        // thread is gone (a sync failed, and `finish` says so).
        let _ = self.ask.try_send(());
    }

    /// Waits for the syncs asked for: the error of the one that failed, if any did.
    pub(crate) fn finish(self) -> io::Result<()> {
        drop(self.ask);
        self.thread
            .join()
            .map_err(|_| io::Error::other("the thread syncing the file panicked"))?
    }
}

fn sync_when_asked(file: &File, asked: &Receiver<()>) -> io::Result<()> {
    while asked.recv().is_ok() {
        file.sync_data()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::OwnedFd;

    use super::*;

    #[test]
    fn a_failed_sync_is_reported_by_finish_and_later_asks_do_not_block() {
        // A pipe's data cannot be synced (EINVAL), as a file on a failing device cannot.
        let (_reader, writer) = io::pipe().expect("a pipe");
        let file = File::from(OwnedFd::from(writer));
        let sync = BackgroundSync::start(&file).expect("the thread");
        for _ in 0..5 {
            sync.ask();
        }
        let error = sync.finish().expect_err("a pipe cannot be synced");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn the_syncs_asked_of_a_file_end_without_error() {
        let mut file = tempfile::tempfile().expect("a file");
        let sync = BackgroundSync::start(&file).expect("the thread");
        file.write_all(&[7; 8192]).expect("written");
        sync.ask();
        sync.finish().expect("synced");
    }
}
