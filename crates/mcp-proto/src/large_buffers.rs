//! Large buffers kept for reuse by everything that writes or reads file chunks.
//!
//! A file chunk's bytes, its base64 and the line that carries it are each several MiB.
//! Allocated afresh for every chunk, each costs a page fault per 4 KiB touched: the
//! allocator gives memory this large back to the system when it is freed, only to fault it
//! in again for the next chunk. Kept in [`LARGE_BUFFERS`] instead, a few of them go round
//! for the life of the process, whichever side (client or server) and whichever thread
//! takes and gives them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

/// Buffers smaller than this are not kept: allocating them is cheap.
pub const MIN_KEPT_BYTES: usize = 1024 * 1024;
/// Buffers larger than this are let go: a 4 MiB chunk's line is about 5.6 MB.
const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;
/// A new large buffer's room is rounded up to a multiple of this: the next line of a
/// chunk is a few bytes longer (its id has another digit, say) and should still fit a
/// kept one, rather than each few bytes more making a new buffer kept beside the others.
const ROOM_STEP: usize = 256 * 1024;
/// How many buffers are kept at most: enough for the chunks kept in flight, each with its
/// base64 and its line.
const MAX_KEPT: usize = 6;

/// Large buffers kept for reuse, a bounded number of them.
///
/// ```
/// use maljan_mcp_proto::large_buffers::{BufferPool, MIN_KEPT_BYTES};
/// let pool = BufferPool::new();
/// let line = pool.take(MIN_KEPT_BYTES);
/// let address = line.as_ptr();
/// pool.give(line);
/// assert_eq!(pool.take(MIN_KEPT_BYTES).as_ptr(), address);
/// ```
#[derive(Debug, Default)]
pub struct BufferPool {
    kept: Mutex<Vec<Vec<u8>>>,
    /// How many [`InUse`] marks are held: when the last is dropped, the kept buffers go.
    users: AtomicUsize,
}

/// A mark that a transfer is using a [`BufferPool`]: when the last mark of a pool is
/// dropped, the buffers it keeps are let go, so that a process holds no chunk-sized
/// buffers between transfers.
///
/// ```
/// use maljan_mcp_proto::large_buffers::{BufferPool, MIN_KEPT_BYTES};
/// let pool = BufferPool::new();
/// let transfer = pool.in_use();
/// let chunk = pool.take(MIN_KEPT_BYTES);
/// pool.give(chunk);
/// assert_eq!(pool.kept_count(), 1);
/// drop(transfer);
/// assert_eq!(pool.kept_count(), 0);
/// ```
#[derive(Debug)]
#[must_use = "the pool lets its buffers go when the mark is dropped"]
pub struct InUse<'a>(&'a BufferPool);

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        if self.0.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.kept().clear();
        }
    }
}

impl BufferPool {
    /// An empty pool.
    ///
    /// ```
    /// static POOL: maljan_mcp_proto::large_buffers::BufferPool =
    ///     maljan_mcp_proto::large_buffers::BufferPool::new();
    /// assert!(POOL.take(10).is_empty());
    /// ```
    pub const fn new() -> Self {
        BufferPool {
            kept: Mutex::new(Vec::new()),
            users: AtomicUsize::new(0),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A panic while the list was held leaves it a valid list of empty buffers.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the pool in use by a transfer until the mark is dropped (see [`InUse`]). A
    /// server that keeps its buffers for its whole life takes no mark.
    pub fn in_use(&self) -> InUse<'_> {
        self.users.fetch_add(1, Ordering::AcqRel);
        InUse(self)
    }

    /// How many buffers are kept now.
    ///
    /// ```
    /// let pool = maljan_mcp_proto::large_buffers::BufferPool::new();
    /// assert_eq!(pool.kept_count(), 0);
    /// ```
    pub fn kept_count(&self) -> usize {
        self.kept().len()
    }

    /// An empty buffer with room for at least `capacity` bytes: a kept one when one is
    /// large enough, a new one otherwise.
    ///
    /// ```
    /// let buffer = maljan_mcp_proto::large_buffers::LARGE_BUFFERS.take(4096);
    /// assert!(buffer.is_empty() && buffer.capacity() >= 4096);
    /// ```
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        if capacity >= MIN_KEPT_BYTES {
            let mut kept = self.kept();
            if let Some(i) = kept.iter().position(|b| b.capacity() >= capacity) {
                return kept.swap_remove(i);
            }
            return Vec::with_capacity(capacity.next_multiple_of(ROOM_STEP));
        }
        Vec::with_capacity(capacity)
    }

    /// An empty string with room for at least `capacity` bytes (see [`BufferPool::take`]).
    ///
    /// ```
    /// let base64 = maljan_mcp_proto::large_buffers::LARGE_BUFFERS.take_string(4096);
    /// assert!(base64.is_empty() && base64.capacity() >= 4096);
    /// ```
    pub fn take_string(&self, capacity: usize) -> String {
        // An empty buffer is valid UTF-8.
        String::from_utf8(self.take(capacity)).unwrap_or_default()
    }

    /// Keeps a buffer for reuse, when it is large and fewer than the most are kept.
    ///
    /// ```
    /// use maljan_mcp_proto::large_buffers::BufferPool;
    /// let pool = BufferPool::new();
    /// pool.give(vec![1, 2, 3]); // too small to be worth keeping
    /// assert_eq!(pool.take(3).capacity(), 3);
    /// ```
    pub fn give(&self, mut buffer: Vec<u8>) {
        if !(MIN_KEPT_BYTES..=MAX_KEPT_BYTES).contains(&buffer.capacity()) {
            return;
        }
        let mut kept = self.kept();
        if kept.len() < MAX_KEPT {
            buffer.clear();
            kept.push(buffer);
        }
    }

    /// Keeps the large strings of a value no longer needed (a chunk's base64, once
    /// written into its line).
    ///
    /// ```
    /// use maljan_mcp_proto::large_buffers::{BufferPool, MIN_KEPT_BYTES};
    /// let pool = BufferPool::new();
    /// let chunk = "A".repeat(MIN_KEPT_BYTES);
    /// let address = chunk.as_ptr();
    /// let mut arguments = serde_json::json!({"offset": 0});
    /// arguments["content_base64"] = serde_json::Value::String(chunk);
    /// pool.give_strings(arguments);
    /// assert_eq!(pool.take_string(MIN_KEPT_BYTES).as_ptr(), address);
    /// ```
    pub fn give_strings(&self, value: Value) {
        match value {
            Value::String(s) if s.capacity() >= MIN_KEPT_BYTES => self.give(s.into_bytes()),
            Value::Array(items) => items.into_iter().for_each(|v| self.give_strings(v)),
            Value::Object(map) => map.into_iter().for_each(|(_, v)| self.give_strings(v)),
            _ => {}
        }
    }
}

/// The process's large buffers: shared by the client's and the server's chunks, lines and
/// writers.
pub static LARGE_BUFFERS: BufferPool = BufferPool::new();

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(pool: &BufferPool) -> usize {
        pool.kept_count()
    }

    #[test]
    fn a_large_buffer_given_back_is_handed_out_again_empty() {
        let pool = BufferPool::new();
        let mut big = pool.take(MIN_KEPT_BYTES);
        big.extend_from_slice(b"old bytes");
        let address = big.as_ptr();
        pool.give(big);
        let again = pool.take(MIN_KEPT_BYTES);
        assert_eq!(again.as_ptr(), address);
        assert!(again.is_empty());
        let another = pool.take(MIN_KEPT_BYTES);
        assert_ne!(another.as_ptr(), address, "handed out once");
    }

    #[test]
    fn small_too_large_and_surplus_buffers_are_let_go() {
        let pool = BufferPool::new();
        pool.give(Vec::with_capacity(MIN_KEPT_BYTES - 1));
        pool.give(Vec::with_capacity(MAX_KEPT_BYTES + 1));
        assert_eq!(kept(&pool), 0);
        for _ in 0..MAX_KEPT + 2 {
            pool.give(Vec::with_capacity(MIN_KEPT_BYTES));
        }
        assert_eq!(kept(&pool), MAX_KEPT);
        let larger = pool.take(MIN_KEPT_BYTES + 1);
        assert!(
            larger.capacity() > MIN_KEPT_BYTES,
            "none kept is large enough"
        );
        assert_eq!(kept(&pool), MAX_KEPT);
    }

    #[test]
    fn only_the_large_strings_of_a_value_are_kept() {
        let pool = BufferPool::new();
        let chunk = "A".repeat(MIN_KEPT_BYTES);
        let address = chunk.as_ptr();
        let mut value = serde_json::json!({"chunks": [], "small": "x", "n": 1});
        value["chunks"] = Value::Array(vec![Value::String(chunk)]);
        pool.give_strings(value);
        assert_eq!(kept(&pool), 1);
        let reused = pool.take_string(MIN_KEPT_BYTES);
        assert_eq!(reused.as_ptr(), address);
    }

    #[test]
    fn a_slightly_longer_line_fits_the_buffer_of_the_last() {
        let pool = BufferPool::new();
        let line = pool.take(5_592_500);
        let address = line.as_ptr();
        pool.give(line);
        let next = pool.take(5_592_501);
        assert_eq!(next.as_ptr(), address, "one more byte fits the kept buffer");
    }

    #[test]
    fn buffers_go_when_the_last_transfer_ends() {
        let pool = BufferPool::new();
        let first = pool.in_use();
        let second = pool.in_use();
        pool.give(Vec::with_capacity(MIN_KEPT_BYTES));
        drop(first);
        assert_eq!(kept(&pool), 1, "another transfer still uses the pool");
        drop(second);
        assert_eq!(kept(&pool), 0);
        pool.give(Vec::with_capacity(MIN_KEPT_BYTES));
        assert_eq!(kept(&pool), 1, "kept again, with no mark held");
    }
}
