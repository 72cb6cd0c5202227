#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

mod background_sync;

use background_sync::BackgroundSync;

/// The alignment of a direct write's buffer, length and file offset: 4096 bytes covers
/// the logical block size of every common device.
///
/// Bytes handed to [`DirectWriter::write_all`] at an address aligned to this are written
/// straight from where they are, whole multiples of it at a time, instead of being copied
/// into the writer's block first.
///
/// ```
/// let mut buffer = vec![0u8; 3 * maljan_direct_write::ALIGN];
/// let start = buffer.as_ptr().align_offset(maljan_direct_write::ALIGN);
/// assert!(start < maljan_direct_write::ALIGN);
/// ```
pub const ALIGN: usize = 4096;

/// Empties `buffer` and pads it to its first address aligned to [`ALIGN`], with room after
/// that for `room` bytes: bytes then appended (up to `room`) do not move the buffer, and
/// start at the index returned, aligned, so that [`DirectWriter::write_all`] writes them
/// straight from there (a file chunk decoded into the buffer, say).
///
/// The padding is zeros, at most [`ALIGN`] bytes. Should the address's alignment not be
/// worked out (Rust allows `align_offset` to say so), the index is [`ALIGN`], unaligned, and
/// the bytes are written through the writer's block instead.
///
/// ```
/// use maljan_direct_write::{ALIGN, pad_to_aligned};
/// let mut buffer = b"old bytes".to_vec();
/// let start = pad_to_aligned(&mut buffer, 10_000);
/// buffer.extend_from_slice(&[7; 10_000]);
/// assert_eq!(buffer[start..].as_ptr().align_offset(ALIGN), 0);
/// assert_eq!(&buffer[start..], &[7; 10_000]);
/// ```
pub fn pad_to_aligned(buffer: &mut Vec<u8>, room: usize) -> usize {
    buffer.clear();
    buffer.reserve(ALIGN + room);
    let start = buffer.as_ptr().align_offset(ALIGN).min(ALIGN);
    buffer.resize(start, 0);
    start
}

/// Bytes gathered before each direct write: larger blocks wrote no faster, for more memory.
pub const BLOCK_BYTES: usize = 1024 * 1024;

/// The file is made durable this many bytes at a time, on a thread of its own while the
/// writes go on, so that [`DirectWriter::finish`] waits for the last few MiB only, not the
/// whole file: written through the page cache, bytes wait there; written direct, they may
/// wait in the device's own cache (a virtual disk's host cache, where a flush of 256 MiB
/// was seen to take 0.3 s).
pub const SYNC_BYTES: u64 = 32 * 1024 * 1024;

/// Writes one file front to back, direct where the filesystem allows it.
///
/// Bytes are kept in the writer until a block is full, and the last partial block until
/// [`finish`](Self::finish): a writer dropped without it leaves the file short.
#[derive(Debug)]
pub struct DirectWriter {
    /// The file, its descriptor in direct mode (`O_DIRECT`) while `direct`.
    file: File,
    /// Whether full blocks are written direct: until the filesystem refuses one.
    direct: bool,
    block: AlignedBlock,
    /// Bytes in the file: where the block's first byte goes.
    written: u64,
    /// Bytes written since the last sync was asked for.
    unsynced: u64,
    /// The thread making the file durable behind the writes, once past [`SYNC_BYTES`].
    sync: Option<BackgroundSync>,
}

impl DirectWriter {
    /// Creates (or truncates) the file at `path`.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let writer = maljan_direct_write::DirectWriter::create(dir.path().join("a"))?;
    /// assert_eq!(writer.finish()?, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Ok(DirectWriter::new(File::create(path)?))
    }

    /// Writes into `file`, an empty file opened for writing, from its start.
    ///
    /// The file's descriptor is switched to direct I/O (`O_DIRECT`) where the system and its
    /// filesystem allow it, and back before the tail is written: the writer owns it, so no
    /// other descriptor is opened and nothing else writes to it meanwhile.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("a");
    /// let mut writer = maljan_direct_write::DirectWriter::new(std::fs::File::create_new(&path)?);
    /// writer.write_all(&[7; 5000])?;
    /// assert_eq!(writer.finish()?, 5000);
    /// assert_eq!(std::fs::read(&path)?, [7; 5000]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(file: File) -> Self {
        let block = AlignedBlock::new();
        let direct = block.is_aligned() && set_direct(&file, true).is_ok();
        DirectWriter {
            file,
            direct,
            block,
            written: 0,
            unsynced: 0,
            sync: None,
        }
    }

    /// Whether blocks are written past the page cache (until the filesystem refuses one).
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Bytes taken so far, written or waiting for a block to fill.
    pub fn len(&self) -> u64 {
        self.written + self.block.len as u64
    }

    /// Whether no byte was taken yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `bytes`: each block filled is written at once. When nothing is gathered and
    /// `bytes` starts at an address aligned to [`ALIGN`], its whole multiples of [`ALIGN`]
    /// are written at once, straight from `bytes`.
    ///
    /// ```
    /// use maljan_direct_write::{ALIGN, DirectWriter};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("a");
    /// let mut writer = DirectWriter::create(&path)?;
    /// let mut buffer = vec![7u8; 3 * ALIGN];
    /// let start = buffer.as_ptr().align_offset(ALIGN);
    /// writer.write_all(&buffer[start..start + ALIGN + 10])?;
    /// assert_eq!(writer.finish()?, ALIGN as u64 + 10);
    /// assert_eq!(std::fs::read(&path)?, [7; ALIGN + 10]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if self.direct && self.block.len == 0 {
            bytes = self.write_straight(bytes)?;
        }
        if !self.direct {
            return self.write_buffered(bytes);
        }
        while !bytes.is_empty() {
            let room = self.block.room();
            let take = room.len().min(bytes.len());
            room[..take].copy_from_slice(&bytes[..take]);
            self.block.len += take;
            bytes = &bytes[take..];
            if self.block.len == BLOCK_BYTES {
                self.write_block()?;
                if !self.direct {
                    return self.write_buffered(bytes);
                }
            }
        }
        Ok(())
    }

    /// Writes what is left and makes the file durable; returns its length.
    pub fn finish(self) -> io::Result<u64> {
        self.finish_into_file().map(|(written, _)| written)
    }

    /// [`finish`](Self::finish), handing the file back as well (its descriptor out of
    /// direct mode): to learn what it now is without opening it again by name.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let mut writer = maljan_direct_write::DirectWriter::create(dir.path().join("a"))?;
    /// writer.write_all(b"abc")?;
    /// let (written, file) = writer.finish_into_file()?;
    /// assert_eq!((written, file.metadata()?.len()), (3, 3));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn finish_into_file(mut self) -> io::Result<(u64, File)> {
        if self.direct {
            // The tail is not a whole block: it goes through the page cache.
            set_direct(&self.file, false)?;
        }
        self.write_gathered_buffered()?;
        if let Some(sync) = self.sync.take() {
            sync.finish()?;
        }
        self.file.sync_all()?;
        Ok((self.written, self.file))
    }

    /// [`write_all`](Self::write_all), with `beside` run on a thread of its own meanwhile
    /// (hashing the same bytes, say): a direct write mostly waits on the device, a virtual
    /// disk's 4 MiB in about 10 ms. Returns once both are done; the write's error, else an
    /// error when the thread could not start (`beside` is then not run) or panicked.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let mut writer = maljan_direct_write::DirectWriter::create(dir.path().join("a"))?;
    /// let bytes = vec![7u8; 5000];
    /// let mut sum = 0u64;
    /// writer.write_all_beside(&bytes, || sum = bytes.iter().map(|&b| u64::from(b)).sum())?;
    /// assert_eq!((sum, writer.finish()?), (35000, 5000));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_all_beside(
        &mut self,
        bytes: &[u8],
        beside: impl FnOnce() + Send,
    ) -> io::Result<()> {
        std::thread::scope(|scope| {
            let running = std::thread::Builder::new()
                .name("beside a write".to_owned())
                .spawn_scoped(scope, beside)?;
            let written = self.write_all(bytes);
            running
                .join()
                .map_err(|_| io::Error::other("the work beside a write panicked"))?;
            written
        })
    }

    /// Writes the whole multiples of [`ALIGN`] at the start of `bytes` direct, from where
    /// they are, when `bytes` starts at an aligned address (a file chunk decoded there,
    /// say): the copy into the block costs as much as a pass over the bytes. Returns what is
    /// left to gather; when the filesystem refuses the write, direct writes are off and
    /// every byte is left.
    fn write_straight<'a>(&mut self, bytes: &'a [u8]) -> io::Result<&'a [u8]> {
        let whole = bytes.len() / ALIGN * ALIGN;
        if whole == 0 || bytes.as_ptr().align_offset(ALIGN) != 0 {
            return Ok(bytes);
        }
        match self.file.write_all_at(&bytes[..whole], self.written) {
            Ok(()) => {
                self.written += whole as u64;
                self.count_unsynced(whole)?;
                Ok(&bytes[whole..])
            }
            // As in `write_block`: what was written at this offset is written again.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                set_direct(&self.file, false)?;
                self.direct = false;
                Ok(bytes)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes the full block direct, or, when the filesystem refuses direct writes, through
    /// the page cache from then on.
    fn write_block(&mut self) -> io::Result<()> {
        if self.direct {
            let block = &self.block.storage[self.block.start..self.block.start + self.block.len];
            match self.file.write_all_at(block, self.written) {
                Ok(()) => {
                    let len = std::mem::take(&mut self.block.len);
                    self.written += len as u64;
                    return self.count_unsynced(len);
                }
                // Refused by the filesystem (or the device's alignment): nothing was
                // written at this offset that a buffered write will not overwrite.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    set_direct(&self.file, false)?;
                    self.direct = false;
                }
                Err(e) => return Err(e),
            }
        }
        self.write_gathered_buffered()
    }

    /// Writes what the block holds through the page cache, emptying it.
    fn write_gathered_buffered(&mut self) -> io::Result<()> {
        let gathered = std::mem::take(&mut self.block.len);
        let start = self.block.start;
        self.file
            .write_all_at(&self.block.storage[start..start + gathered], self.written)?;
        self.written += gathered as u64;
        self.unsynced += gathered as u64;
        Ok(())
    }

    /// Writes `bytes` through the page cache (the block is empty once direct writes are
    /// off: `write_block` writes what it held before turning them off).
    fn write_buffered(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.written)?;
        self.written += bytes.len() as u64;
        self.count_unsynced(bytes.len())
    }

    /// Counts `len` bytes written, asking for the file to be made durable each
    /// [`SYNC_BYTES`]: on the sync thread (started the first time), or here should it not
    /// start.
    fn count_unsynced(&mut self, len: usize) -> io::Result<()> {
        self.unsynced += len as u64;
        if self.unsynced < SYNC_BYTES {
            return Ok(());
        }
        self.unsynced = 0;
        if self.sync.is_none() {
            self.sync = BackgroundSync::start(&self.file).ok();
        }
        match &self.sync {
            Some(sync) => sync.ask(),
            None => self.file.sync_data()?,
        }
        Ok(())
    }
}

/// A block of [`BLOCK_BYTES`] at an address aligned to [`ALIGN`], inside a vector allocated
/// that much larger.
#[derive(Debug)]
struct AlignedBlock {
    storage: Vec<u8>,
    /// Where the aligned block starts in `storage`.
    start: usize,
    /// Bytes gathered.
    len: usize,
}

impl AlignedBlock {
    fn new() -> Self {
        let mut storage = Vec::new();
        // Unaligned when the alignment cannot be worked out: the writer then writes buffered.
        let start = pad_to_aligned(&mut storage, BLOCK_BYTES);
        storage.resize(start + BLOCK_BYTES, 0);
        AlignedBlock {
            storage,
            start,
            len: 0,
        }
    }

    fn is_aligned(&self) -> bool {
        self.start < ALIGN
    }

    /// The block's free part.
    fn room(&mut self) -> &mut [u8] {
        &mut self.storage[self.start + self.len..self.start + BLOCK_BYTES]
    }
}

/// Switches the descriptor's direct I/O on or off: refused (`EINVAL`) where the filesystem
/// takes no direct I/O.
#[cfg(target_os = "linux")]
fn set_direct(file: &File, on: bool) -> io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(file)?;
    let flags = if on {
        flags | OFlags::DIRECT
    } else {
        flags - OFlags::DIRECT
    };
    fcntl_setfl(file, flags)?;
    Ok(())
}

/// Switches the descriptor's direct I/O on or off: only ever off on this system.
#[cfg(not(target_os = "linux"))]
fn set_direct(_file: &File, on: bool) -> io::Result<()> {
    if on {
        Err(io::ErrorKind::Unsupported.into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Bytes that differ from block to block, so a block written at the wrong offset shows.
    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ (i >> 12) as u8 ^ seed)
            .collect()
    }

    /// `bytes` copied to an address aligned to [`ALIGN`], inside a larger vector.
    fn aligned_copy(bytes: &[u8]) -> (Vec<u8>, usize) {
        let mut storage = Vec::new();
        let start = pad_to_aligned(&mut storage, bytes.len());
        storage.extend_from_slice(bytes);
        (storage, start)
    }

    fn write_in_pieces(writer: &mut DirectWriter, pieces: &[Vec<u8>]) -> Vec<u8> {
        write_in_pieces_placed(writer, pieces, false)
    }

    /// Writes each piece, from an aligned address when `aligned`.
    fn write_in_pieces_placed(
        writer: &mut DirectWriter,
        pieces: &[Vec<u8>],
        aligned: bool,
    ) -> Vec<u8> {
        let mut expected = Vec::new();
        for piece in pieces {
            if aligned {
                let (storage, start) = aligned_copy(piece);
                writer
                    .write_all(&storage[start..start + piece.len()])
                    .expect("written");
            } else {
                writer.write_all(piece).expect("written");
            }
            expected.extend_from_slice(piece);
            assert_eq!(writer.len(), expected.len() as u64);
        }
        expected
    }

    /// A writer of a new file in `dir`, and the file's path; `None`, saying what cannot be
    /// shown, where the filesystem takes no direct writes.
    fn direct_writer(
        dir: &tempfile::TempDir,
        not_shown: &str,
    ) -> Option<(std::path::PathBuf, DirectWriter)> {
        let path = dir.path().join("out");
        let writer = DirectWriter::create(&path).expect("created");
        if writer.is_direct() {
            Some((path, writer))
        } else {
            eprintln!("this filesystem takes no direct writes: {not_shown}");
            None
        }
    }

    fn any_pieces() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let size = prop_oneof![
            0..64usize,
            4090..4100usize,
            BLOCK_BYTES - 3..BLOCK_BYTES + 3,
            0..3 * BLOCK_BYTES,
        ];
        prop::collection::vec((size, any::<u8>()), 0..6)
            .prop_map(|sizes| sizes.into_iter().map(|(n, s)| pattern(n, s)).collect())
    }

    proptest! {
        #[test]
        fn a_padded_buffer_takes_its_room_in_place_from_an_aligned_start(
            before in prop::collection::vec(any::<u8>(), 0..10_000),
            room in 0..20_000usize,
        ) {
            let mut buffer = before;
            let start = pad_to_aligned(&mut buffer, room);
            prop_assert_eq!(buffer.len(), start);
            prop_assert!(buffer.iter().all(|b| *b == 0));
            let at = buffer.as_ptr();
            buffer.extend(std::iter::repeat_n(1u8, room));
            prop_assert_eq!(buffer.as_ptr(), at, "the room was taken without moving the buffer");
            prop_assert_eq!(buffer[start..].as_ptr().align_offset(ALIGN), 0);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        #[test]
        fn the_file_holds_every_byte_written_in_order(
            pieces in any_pieces(),
            buffered in any::<bool>(),
            aligned in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join("out");
            let mut writer = DirectWriter::create(&path).expect("created");
            if buffered {
                set_direct(&writer.file, false).expect("direct I/O off");
                writer.direct = false;
            }
            let expected = write_in_pieces_placed(&mut writer, &pieces, aligned);
            prop_assert_eq!(writer.finish().expect("finished"), expected.len() as u64);
            let read = std::fs::read(&path).expect("read");
            prop_assert_eq!(read.len(), expected.len());
            prop_assert!(read == expected, "the file's bytes differ from those written");
        }
    }

    #[test]
    fn a_block_the_filesystem_refuses_is_written_through_the_page_cache_and_so_is_the_rest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let Some((path, mut writer)) = direct_writer(&dir, "the refusal cannot be shown here")
        else {
            return;
        };
        // A buffer one byte off the alignment: the kernel refuses the direct write with
        // EINVAL, as a filesystem that takes no direct writes does.
        let start = writer.block.start;
        writer.block.start = if start > 0 { start - 1 } else { start + 1 };
        let pieces = [pattern(BLOCK_BYTES + 100, 1), pattern(3 * BLOCK_BYTES, 2)];
        let expected = write_in_pieces(&mut writer, &pieces);
        assert!(!writer.is_direct(), "the refusal turned direct writes off");
        assert_eq!(writer.finish().expect("finished"), expected.len() as u64);
        assert!(std::fs::read(&path).expect("read") == expected);
    }

    #[test]
    fn aligned_bytes_the_filesystem_refuses_go_through_the_page_cache_and_so_does_the_rest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let Some((path, mut writer)) = direct_writer(&dir, "the refusal cannot be shown here")
        else {
            return;
        };
        // The file's offset one byte off the alignment (a hole of one byte before it): the
        // kernel refuses the straight write of aligned bytes with EINVAL, as a filesystem
        // that opens files for direct I/O and then refuses their writes does.
        writer.written = 1;
        let mut expected = vec![0u8];
        for (number, piece) in [pattern(2 * BLOCK_BYTES + 100, 5), pattern(BLOCK_BYTES, 6)]
            .iter()
            .enumerate()
        {
            let (storage, start) = aligned_copy(piece);
            writer
                .write_all(&storage[start..start + piece.len()])
                .expect("written");
            assert!(!writer.is_direct(), "piece {number}: direct writes are off");
            expected.extend_from_slice(piece);
            assert_eq!(writer.len(), expected.len() as u64);
        }
        assert_eq!(writer.finish().expect("finished"), expected.len() as u64);
        assert!(std::fs::read(&path).expect("read") == expected);
    }

    #[test]
    fn aligned_bytes_go_out_at_once_in_whole_multiples_of_the_alignment() {
        let dir = tempfile::tempdir().expect("temp dir");
        let Some((path, mut writer)) = direct_writer(&dir, "nothing goes straight") else {
            return;
        };
        let bytes = pattern(5 * ALIGN + 10, 4);
        let (storage, start) = aligned_copy(&bytes);
        writer
            .write_all(&storage[start..start + bytes.len()])
            .expect("written");
        let on_disk = std::fs::metadata(&path).expect("metadata").len();
        assert_eq!(
            on_disk,
            5 * ALIGN as u64,
            "less than a block, on disk at once"
        );
        writer.write_all(&bytes[..7]).expect("written");
        assert_eq!(writer.finish().expect("finished"), bytes.len() as u64 + 7);
        let mut expected = bytes.clone();
        expected.extend_from_slice(&bytes[..7]);
        assert!(std::fs::read(&path).expect("read") == expected);
    }

    #[test]
    fn a_whole_block_goes_out_before_finish_and_the_tail_only_at_finish() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out");
        let mut writer = DirectWriter::create(&path).expect("created");
        let bytes = pattern(BLOCK_BYTES + 10, 3);
        writer.write_all(&bytes).expect("written");
        let on_disk = std::fs::metadata(&path).expect("metadata").len();
        if writer.is_direct() {
            assert_eq!(on_disk, BLOCK_BYTES as u64, "the full block, not the tail");
        } else {
            assert_eq!(on_disk, bytes.len() as u64, "buffered: every byte at once");
        }
        assert_eq!(writer.finish().expect("finished"), bytes.len() as u64);
        assert_eq!(
            std::fs::metadata(&path).expect("metadata").len(),
            bytes.len() as u64
        );
    }

    #[test]
    fn a_file_past_the_sync_size_is_synced_behind_its_writes_and_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out");
        let mut writer = DirectWriter::create(&path).expect("created");
        let piece = pattern(3 * BLOCK_BYTES + 5, 9);
        let pieces = (SYNC_BYTES as usize) / piece.len() + 2;
        for _ in 0..pieces {
            writer.write_all(&piece).expect("written");
        }
        assert!(
            writer.sync.is_some(),
            "past {SYNC_BYTES} bytes a thread makes the file durable"
        );
        assert_eq!(
            writer.finish().expect("finished"),
            (pieces * piece.len()) as u64
        );
        let file = std::fs::read(&path).expect("read");
        assert_eq!(file.len(), pieces * piece.len());
        assert!(file.chunks(piece.len()).all(|c| c == piece));
    }

    #[test]
    fn a_failed_write_still_waits_for_the_work_beside_it_and_says_why() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("read-only");
        std::fs::write(&path, b"").expect("created");
        let mut writer = DirectWriter::new(File::open(&path).expect("opened to read"));
        let bytes = pattern(2 * BLOCK_BYTES, 5);
        let mut ran = false;
        let error = writer
            .write_all_beside(&bytes, || ran = true)
            .expect_err("a read-only descriptor takes no write");
        assert!(ran, "the work beside the write ran to its end");
        assert_eq!(error.raw_os_error(), Some(9), "EBADF: {error}");
    }
}
