//! Where the task that reads a server's stdout runs.
//!
//! Classifying stdout is the transport's heaviest work: a file chunk's answer is a line of
//! several MiB, checked as UTF-8 and as JSON, its result copied out. On a multi-thread
//! runtime a spawned server's stdout is read on a thread of its own: the work does not hold
//! up a runtime worker, and its large buffers are allocated by that one thread (the system
//! allocator keeps an arena per thread, and a reader moving between workers leaves freed
//! multi-MiB buffers in each, which raises the client's peak memory over many transfers).
//! On a current-thread runtime there is one thread to allocate on, and a task beside the
//! callers hands each answer over without waking another thread. Any other reader (an
//! in-memory stream, say) is read by a task on the runtime, which then also sees the work
//! when its clock is paused.

use std::future::Future;
use std::io;
use std::time::Duration;

use futures_util::future::{AbortHandle, Abortable};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The running reader. Dropping it stops the reader at its next wait.
#[derive(Debug)]
pub(crate) enum StdoutReader {
    /// On a thread of its own: stopped through `abort`; `done` fires as the thread ends.
    Thread {
        abort: AbortHandle,
        done: oneshot::Receiver<()>,
        thread: Option<std::thread::JoinHandle<()>>,
    },
    /// A task on the runtime.
    Task(JoinHandle<()>),
}

impl StdoutReader {
    /// Runs `reader` on a new thread named `name`. Its I/O stays driven by the runtime it
    /// was registered with.
    pub(crate) fn on_thread(
        name: String,
        reader: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<Self> {
        let (abort, registration) = AbortHandle::new_pair();
        let (done_tx, done) = oneshot::channel();
        let reader = Abortable::new(reader, registration);
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            // Aborted is one way to end, a panic another (the reader fails its pending
            // calls as it unwinds); either way the thread is done.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                futures_executor::block_on(reader)
            }));
            let _ = done_tx.send(());
        })?;
        Ok(StdoutReader::Thread {
            abort,
            done,
            thread: Some(thread),
        })
    }

    /// Runs `reader` as a task on the current runtime.
    pub(crate) fn on_runtime(reader: impl Future<Output = ()> + Send + 'static) -> Self {
        StdoutReader::Task(tokio::spawn(reader))
    }

    /// Waits up to `grace` for the reader to end by itself, then stops it. A thread that
    /// ended is joined: it is gone when this returns.
    pub(crate) async fn finish(mut self, grace: Duration) {
        let ended = match &mut self {
            StdoutReader::Thread { done, thread, .. } => {
                let ended = tokio::time::timeout(grace, done).await.is_ok();
                if ended && let Some(thread) = thread.take() {
                    // It has sent its last word: only its return is left.
                    let _ = thread.join();
                }
                ended
            }
            StdoutReader::Task(task) => tokio::time::timeout(grace, task).await.is_ok(),
        };
        if !ended {
            self.stop();
        }
    }

    fn stop(&self) {
        match self {
            StdoutReader::Thread { abort, .. } => abort.abort(),
            StdoutReader::Task(task) => task.abort(),
        }
    }
}

impl Drop for StdoutReader {
    fn drop(&mut self) {
        self.stop();
    }
}
