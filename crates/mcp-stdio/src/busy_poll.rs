//! Reading a pipe whose next line is expected soon without going to sleep first.
//!
//! A task that waits for a pipe sleeps in the runtime's event loop, and the write at the
//! other end has to wake it. On a virtual machine that wake-up (an interrupt to an idle
//! vCPU) costs tens of microseconds, several times the work of a small call on both
//! sides. A reader that expects a line soon (an answer to a request just written, a
//! client's next request after an answer) instead polls the pipe for a short window,
//! letting every other task of the runtime run between polls, and only then sleeps.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

use crate::classifier::ReadTarget;

/// How long a reader polls by default once armed: a quick call's answer (or the next
/// request of a client calling one tool after another) comes well within it, from our kit
/// and also, mostly, from a server of another SDK, whose own work per call is several times
/// ours (a window that ends just before the answer comes pays for the wake-up as well).
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(300);

/// A reader's busy-poll window: armed each time a line is written whose reply is expected
/// soon, it makes the next [`read`](BusyPoll::read) poll the reader for up to the window
/// before it sleeps.
///
/// Polling yields to the runtime between attempts (`tokio::task::yield_now`), so every
/// other task keeps running; it costs at most the window in CPU time per arming. A zero
/// window never polls.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
/// use std::time::Duration;
/// use maljan_mcp_stdio::{BusyPoll, Event, LineClassifier};
/// use tokio::io::AsyncWriteExt;
///
/// let (mut reader, mut writer) = tokio::io::duplex(1024);
/// let poll = BusyPoll::new(Duration::from_micros(100));
/// writer.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1}\n").await?;
/// poll.arm();
///
/// let mut classifier = LineClassifier::default();
/// let read = poll.read(&mut reader, &mut classifier.read_target(4096)).await?;
/// assert!(read > 0);
/// assert!(matches!(classifier.poll_event(), Some(Event::Message(_))));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BusyPoll {
    window: Duration,
    armed: AtomicBool,
    /// Wakes a reader asleep in [`read`](BusyPoll::read) so that it starts polling.
    arming: Notify,
}

impl BusyPoll {
    /// A busy poll of `window` (zero: never polls).
    pub fn new(window: Duration) -> BusyPoll {
        BusyPoll {
            window,
            armed: AtomicBool::new(false),
            arming: Notify::new(),
        }
    }

    /// The window.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(maljan_mcp_stdio::BusyPoll::new(Duration::ZERO).window().is_zero());
    /// ```
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Says a line was written whose reply is expected soon: the reader polls for a new
    /// window, from now if it is asleep in [`read`](BusyPoll::read), else from its next
    /// read.
    pub fn arm(&self) {
        if !self.window.is_zero() {
            self.armed.store(true, Ordering::Release);
            self.arming.notify_one();
        }
    }

    /// Reads from `reader` into `target`: when armed, polls for up to the window first;
    /// then sleeps until the reader is ready, or until armed again. Cancel safe, as
    /// `read_buf` is: dropped before it returns, nothing was read.
    pub async fn read<R: AsyncRead + Unpin>(
        &self,
        reader: &mut R,
        target: &mut ReadTarget<'_>,
    ) -> io::Result<usize> {
        if self.window.is_zero() {
            return reader.read_buf(&mut target.buf()).await;
        }
        loop {
            if self.armed.swap(false, Ordering::AcqRel) {
                let until = Instant::now() + self.window;
                loop {
                    let mut buf = target.buf();
                    let mut read = std::pin::pin!(reader.read_buf(&mut buf));
                    // Polled once with this task's waker, so a reader found not ready is
                    // registered with the event loop as a sleeping read would be.
                    let polled = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx)));
                    if let Poll::Ready(read) = polled.await {
                        return read;
                    }
                    if Instant::now() >= until {
                        break;
                    }
                    // The writer of the awaited line may be waiting for this very CPU (a busy
                    // machine, or one core): the thread gives it up before polling again. On
                    // an idle CPU this returns at once; on a busy one the window runs out
                    // while others run, and the reader goes to sleep.
                    std::thread::yield_now();
                    tokio::task::yield_now().await;
                }
            }
            let mut buf = target.buf();
            tokio::select! {
                biased;
                read = reader.read_buf(&mut buf) => return read,
                () = self.arming.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LineClassifier;
    use tokio::io::AsyncWriteExt;

    /// A line that comes after the window ran out is read all the same, and so is one
    /// that comes after the reader, asleep, was armed again.
    #[tokio::test(flavor = "current_thread")]
    async fn reads_what_comes_after_the_window() {
        let (mut reader, mut writer) = tokio::io::duplex(64);
        let poll = BusyPoll::new(Duration::from_nanos(1));
        let mut classifier = LineClassifier::default();
        poll.arm();
        let read = async {
            let first = poll
                .read(&mut reader, &mut classifier.read_target(64))
                .await;
            let second = poll
                .read(&mut reader, &mut classifier.read_target(64))
                .await;
            (first.unwrap(), second.unwrap())
        };
        let write = async {
            tokio::task::yield_now().await;
            writer.write_all(b"late\n").await?;
            tokio::task::yield_now().await;
            poll.arm();
            tokio::task::yield_now().await;
            writer.write_all(b"later\n").await
        };
        let (read, written) = tokio::join!(read, write);
        written.unwrap();
        assert_eq!(read, (5, 6));
        let mut lines = 0;
        while classifier.poll_event().is_some() {
            lines += 1;
        }
        assert_eq!(classifier.counts().stray, 2, "{lines} events");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_zero_window_never_arms() {
        let poll = BusyPoll::new(Duration::ZERO);
        poll.arm();
        assert!(!poll.armed.load(Ordering::Acquire));
        let (mut reader, mut writer) = tokio::io::duplex(64);
        writer.write_all(b"x\n").await.unwrap();
        let mut classifier = LineClassifier::default();
        let read = poll
            .read(&mut reader, &mut classifier.read_target(64))
            .await;
        assert_eq!(read.unwrap(), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_end_of_stream_is_read_while_polling() {
        let (mut reader, writer) = tokio::io::duplex(64);
        drop(writer);
        let poll = BusyPoll::new(Duration::from_millis(1));
        poll.arm();
        let mut classifier = LineClassifier::default();
        let read = poll
            .read(&mut reader, &mut classifier.read_target(64))
            .await;
        assert_eq!(read.unwrap(), 0);
    }
}
