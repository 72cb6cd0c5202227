//! Large buffers kept for reuse.
//!
//! A file chunk's bytes, its base64 and the reply line that carries it are each several
//! MiB. Allocated afresh for every chunk, on whichever blocking thread runs the call, each
//! costs a page fault per 4 KiB touched, and the allocator's per-thread arenas hand freed
//! memory back to the system only to fault it in again. Kept here instead, a few of them go
//! round for the whole life of the server.

use std::sync::Mutex;

use serde_json::Value;

use crate::job::lock;

/// Buffers smaller than this are not worth keeping: allocating them is cheap.
pub(crate) const MIN_KEPT_BYTES: usize = 1024 * 1024;
/// Buffers larger than this are let go: a 4 MiB chunk's reply line is about 5.6 MB.
const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;
/// How many buffers are kept at most: enough for the chunks a client keeps in flight.
const MAX_KEPT: usize = 6;

/// Buffers kept for reuse, at most [`MAX_KEPT`].
#[derive(Debug, Default)]
pub(crate) struct BufferPool(Mutex<Vec<Vec<u8>>>);

impl BufferPool {
    /// An empty pool.
    pub(crate) const fn new() -> Self {
        BufferPool(Mutex::new(Vec::new()))
    }

    /// An empty buffer with room for at least `capacity` bytes: a kept one when one is
    /// large enough, a new one otherwise.
    pub(crate) fn take(&self, capacity: usize) -> Vec<u8> {
        if capacity >= MIN_KEPT_BYTES {
            let mut kept = lock(&self.0);
            if let Some(i) = kept.iter().position(|b| b.capacity() >= capacity) {
                return kept.swap_remove(i);
            }
        }
        Vec::with_capacity(capacity)
    }

    /// An empty string with room for at least `capacity` bytes (see [`BufferPool::take`]).
    pub(crate) fn take_string(&self, capacity: usize) -> String {
        // An empty buffer is valid UTF-8.
        String::from_utf8(self.take(capacity)).unwrap_or_default()
    }

    /// Keeps a buffer for reuse, when it is large and fewer than the most are kept.
    pub(crate) fn give(&self, mut buffer: Vec<u8>) {
        if !(MIN_KEPT_BYTES..=MAX_KEPT_BYTES).contains(&buffer.capacity()) {
            return;
        }
        let mut kept = lock(&self.0);
        if kept.len() < MAX_KEPT {
            buffer.clear();
            kept.push(buffer);
        }
    }

    /// Keeps the large strings of a value no longer needed (a chunk's base64, once
    /// written).
    pub(crate) fn give_strings(&self, value: Value) {
        match value {
            Value::String(s) if s.capacity() >= MIN_KEPT_BYTES => self.give(s.into_bytes()),
            Value::Array(items) => items.into_iter().for_each(|v| self.give_strings(v)),
            Value::Object(map) => map.into_iter().for_each(|(_, v)| self.give_strings(v)),
            _ => {}
        }
    }
}

/// The server's buffers: shared by its calls, its replies and its writer.
pub(crate) static BUFFERS: BufferPool = BufferPool::new();

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(pool: &BufferPool) -> usize {
        lock(&pool.0).len()
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
}
