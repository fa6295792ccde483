//! The spill: where `pantheon-sim run` puts its final records (records.rs) and delivery
//! opportunities while the run goes on, so that its memory does not grow with its datagrams,
//! and from which records.parquet and the merged logs are written once it ends.
//!
//! One file in the run's directory, `.records.spill`, appended to in chunks: each chunk holds
//! consecutive rows of one stream (a flow's data, a flow's acknowledgements, or a direction's
//! opportunities), fixed-width little-endian rows (`Row`). A chunk is narrow where it can be: its
//! records' uids consecutive (the chunk notes the first) and its times below 2³² µs (71 minutes),
//! 9 bytes a record (send_us, recv_us as u32, ECN and CE in a byte) and 4 an opportunity; else
//! wide, 26 bytes a record (uid, send_us, recv_us as u64, ECN, CE) and 8 an opportunity. A run's
//! chunks are all narrow (the tunnel numbers each stream's datagrams one by one), and the file is
//! written and read back three times; narrow rows made 60 s of Cubic at 1 Gbit/s take 0.6 s less
//! of the kernel's copying than the wide ones. An index in memory (32 bytes a chunk, chunks of
//! thousands of rows) says where each stream's chunks lie, in order; a reader of a stream reads them back in pieces of at most `READ_ROWS`
//! rows with positioned reads, so that several readers (the three files' threads) share the file.
//! One file rather than one per stream: a run of many flows needs no descriptor per flow.
//!
//! The index also notes whether each stream's times come in order (sends, arrivals,
//! opportunities), which the merged logs need to know before they read a row (merged_logs.rs).
//!
//! The file loses its name as soon as it is created: it lives on through its open descriptor
//! alone and goes with its last owner, after the files are written, and equally when the run or
//! a write fails, the writer panics or the process is killed (SIGKILL, the OOM killer) — nothing
//! is ever left behind in the run's directory. A write error is kept, stops further writing and
//! is reported by `Spill::finish`: an observer's methods cannot fail.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::marker::PhantomData;
use std::os::unix::fs::FileExt;
use std::path::{Path as FsPath, PathBuf};

use pantheon_link::Ecn;

use crate::crossing::{Crossing, Store, Way};
use crate::observer::Direction;

/// The spill's name in the run's directory, for the instant between its creation and its removal.
pub const SPILL_NAME: &str = ".records.spill";
/// Most rows a reader holds at once: at most 53 kB of records, 16 kB of opportunities.
const READ_ROWS: u64 = 2048;
/// Bytes a chunk of the file is written through (the writer's buffer).
const WRITE_BUFFER_BYTES: usize = 1 << 20;
/// A record's `recv_us` in the file when it has none (lost or in flight at the end): no arrival
/// is that late.
const NO_ARRIVAL: u64 = u64::MAX;

/// A row of the spill, narrow or wide (the module's header).
pub trait Row: Sized {
    /// Bytes of a narrow row and of a wide one.
    const NARROW: usize;
    const WIDE: usize;
    /// Whether `rows`, a chunk's, fit narrow rows.
    fn narrow(rows: &[Self]) -> bool;
    fn encode(&self, narrow: bool, out: &mut [u8]);
    /// The row in `bytes`, the `index`-th of a chunk whose first row's uid is `first_uid`.
    fn decode(bytes: &[u8], narrow: bool, first_uid: u64, index: u64) -> Self;
    /// Its uid (records) or 0.
    fn uid(&self) -> u64;
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// A time that fits a narrow row (`u32::MAX` there means no arrival).
fn narrow_us(t_us: u64) -> bool {
    t_us < u64::from(u32::MAX)
}

impl Row for Crossing {
    const NARROW: usize = 9;
    const WIDE: usize = 26;
    fn narrow(rows: &[Crossing]) -> bool {
        let first_uid = rows.first().map_or(0, |c| c.uid);
        rows.iter().enumerate().all(|(i, c)| {
            c.uid.wrapping_sub(first_uid) == i as u64 && narrow_us(c.send_us) && c.recv_us.is_none_or(narrow_us)
        })
    }
    fn encode(&self, narrow: bool, out: &mut [u8]) {
        if narrow {
            out[0..4].copy_from_slice(&(self.send_us as u32).to_le_bytes());
            out[4..8].copy_from_slice(&self.recv_us.map_or(u32::MAX, |t| t as u32).to_le_bytes());
            out[8] = self.ecn.bits() | u8::from(self.ce) << 2;
        } else {
            out[0..8].copy_from_slice(&self.uid.to_le_bytes());
            out[8..16].copy_from_slice(&self.send_us.to_le_bytes());
            out[16..24].copy_from_slice(&self.recv_us.unwrap_or(NO_ARRIVAL).to_le_bytes());
            out[24] = self.ecn.bits();
            out[25] = u8::from(self.ce);
        }
    }
    fn decode(bytes: &[u8], narrow: bool, first_uid: u64, index: u64) -> Crossing {
        if narrow {
            let recv_us = u32_at(bytes, 4);
            Crossing {
                uid: first_uid + index,
                send_us: u64::from(u32_at(bytes, 0)),
                recv_us: (recv_us != u32::MAX).then_some(u64::from(recv_us)),
                ecn: Ecn::from_tos(bytes[8]),
                ce: bytes[8] & 0b100 != 0,
            }
        } else {
            let recv_us = u64_at(bytes, 16);
            Crossing {
                uid: u64_at(bytes, 0),
                send_us: u64_at(bytes, 8),
                recv_us: (recv_us != NO_ARRIVAL).then_some(recv_us),
                ecn: Ecn::from_tos(bytes[24]),
                ce: bytes[25] != 0,
            }
        }
    }
    fn uid(&self) -> u64 {
        self.uid
    }
}

/// An opportunity: its µs.
impl Row for u64 {
    const NARROW: usize = 4;
    const WIDE: usize = 8;
    fn narrow(rows: &[u64]) -> bool {
        rows.iter().all(|&t| narrow_us(t))
    }
    fn encode(&self, narrow: bool, out: &mut [u8]) {
        if narrow {
            out.copy_from_slice(&(*self as u32).to_le_bytes());
        } else {
            out.copy_from_slice(&self.to_le_bytes());
        }
    }
    fn decode(bytes: &[u8], narrow: bool, _first_uid: u64, _index: u64) -> u64 {
        if narrow {
            u64::from(u32_at(bytes, 0))
        } else {
            u64_at(bytes, 0)
        }
    }
    fn uid(&self) -> u64 {
        0
    }
}

/// Consecutive rows of one stream, at `offset` bytes into the file.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    offset: u64,
    rows: u64,
    narrow: bool,
    /// The uid of its first row (records).
    first_uid: u64,
}

impl Chunk {
    fn row_bytes<T: Row>(&self) -> usize {
        if self.narrow {
            T::NARROW
        } else {
            T::WIDE
        }
    }
}

/// Where one stream's rows lie, and whether its times come in order.
#[derive(Debug, Clone)]
struct Index {
    chunks: Vec<Chunk>,
    rows: u64,
    /// Whether every send time (an opportunity's time) so far was at or after the one before,
    /// and the same of the arrival times; the last of each.
    sends_in_order: bool,
    arrivals_in_order: bool,
    last_send_us: u64,
    last_arrival_us: u64,
}

impl Default for Index {
    fn default() -> Index {
        Index {
            chunks: Vec::new(),
            rows: 0,
            sends_in_order: true,
            arrivals_in_order: true,
            last_send_us: 0,
            last_arrival_us: 0,
        }
    }
}

impl Index {
    fn sent(&mut self, t_us: u64) {
        self.sends_in_order &= t_us >= self.last_send_us;
        self.last_send_us = t_us;
    }

    fn arrived(&mut self, t_us: u64) {
        self.arrivals_in_order &= t_us >= self.last_arrival_us;
        self.last_arrival_us = t_us;
    }
}

/// The spill being written: the records' `Store` of `pantheon-sim run`.
#[derive(Debug)]
pub struct Spill {
    out: Option<BufWriter<File>>,
    /// Where the file was created, for messages.
    path: PathBuf,
    /// Bytes written so far: where the next chunk starts.
    offset: u64,
    /// Per flow, its data's stream then its acknowledgements'.
    crossings: Vec<Index>,
    /// The uplink's opportunities, then the downlink's.
    opportunities: [Index; 2],
    /// A chunk's rows, encoded (kept to reuse its room).
    encoded: Vec<u8>,
    error: Option<io::Error>,
}

impl Spill {
    /// A new spill for `flows` flows in `dir` (replacing any a killed run left there).
    pub fn create(dir: &FsPath, flows: usize) -> io::Result<Spill> {
        let path = dir.join(SPILL_NAME);
        let located = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).map_err(located)?;
        std::fs::remove_file(&path).map_err(located)?;
        Ok(Spill {
            out: Some(BufWriter::with_capacity(WRITE_BUFFER_BYTES, file)),
            path,
            offset: 0,
            crossings: vec![Index::default(); 2 * flows],
            opportunities: [Index::default(), Index::default()],
            encoded: Vec::new(),
            error: None,
        })
    }

    /// Appends `rows` to `stream` as one chunk (nothing after an error).
    fn append<T: Row>(&mut self, stream: Stream, rows: &[T], mut note: impl FnMut(&mut Index, &T)) {
        let Some(writer) = &mut self.out else { return };
        let stream = match stream {
            Stream::Crossings(i) => &mut self.crossings[i],
            Stream::Opportunities(i) => &mut self.opportunities[i],
        };
        let Some(first) = rows.first() else { return };
        let narrow = T::narrow(rows);
        let chunk = Chunk { offset: self.offset, rows: rows.len() as u64, narrow, first_uid: first.uid() };
        let row_bytes = chunk.row_bytes::<T>();
        self.encoded.resize(rows.len() * row_bytes, 0);
        for (r, bytes) in rows.iter().zip(self.encoded.chunks_exact_mut(row_bytes)) {
            note(stream, r);
            r.encode(narrow, bytes);
        }
        if let Err(e) = writer.write_all(&self.encoded) {
            self.error = Some(e);
            self.out = None;
            return;
        }
        stream.chunks.push(chunk);
        stream.rows += chunk.rows;
        self.offset += self.encoded.len() as u64;
    }

    /// Ends the writing: the spill to read back, or the first error.
    pub fn finish(mut self) -> io::Result<Spilled> {
        let located = |e: io::Error, path: &FsPath| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if let Some(e) = self.error.take() {
            return Err(located(e, &self.path));
        }
        let writer = self.out.take().expect("a spill without an error has its writer");
        let file = match writer.into_inner() {
            Ok(file) => file,
            Err(e) => return Err(located(e.into_error(), &self.path)),
        };
        let Spill { crossings, opportunities, .. } = self;
        Ok(Spilled { file, crossings, opportunities })
    }
}

/// Which stream `Spill::append` writes: a flow's way (2 × flow + way) or a direction's
/// opportunities.
enum Stream {
    Crossings(usize),
    Opportunities(usize),
}

impl Store for Spill {
    fn crossings(&mut self, flow: usize, way: Way, rows: &[Crossing]) {
        self.append(Stream::Crossings(2 * flow + way as usize), rows, |s, c| {
            s.sent(c.send_us);
            if let Some(t_us) = c.recv_us {
                s.arrived(t_us);
            }
        });
    }

    fn opportunities(&mut self, direction: Direction, t_us: &[u64]) {
        self.append(Stream::Opportunities(direction as usize), t_us, |s, &t| s.sent(t));
    }
}

/// A spill written in full, to read back: each stream's rows in the order they were written.
#[derive(Debug)]
pub struct Spilled {
    file: File,
    crossings: Vec<Index>,
    opportunities: [Index; 2],
}

impl Spilled {
    /// The flows, numbered from 0.
    pub fn flows(&self) -> usize {
        self.crossings.len() / 2
    }

    fn stream(&self, flow: usize, way: Way) -> &Index {
        &self.crossings[2 * flow + way as usize]
    }

    /// How many records `flow` has in `way`.
    pub fn rows(&self, flow: usize, way: Way) -> u64 {
        self.stream(flow, way).rows
    }

    /// `flow`'s records in `way`, in uid order.
    pub fn crossings(&self, flow: usize, way: Way) -> Rows<'_, Crossing> {
        Rows::new(&self.file, &self.stream(flow, way).chunks)
    }

    /// Whether `flow`'s records in `way` have their send times, and their arrival times (those
    /// that have one), in order.
    pub fn in_order(&self, flow: usize, way: Way) -> (bool, bool) {
        let s = self.stream(flow, way);
        (s.sends_in_order, s.arrivals_in_order)
    }

    /// A direction's delivery opportunities, µs, as the path reported them.
    pub fn opportunities_us(&self, direction: Direction) -> Rows<'_, u64> {
        Rows::new(&self.file, &self.opportunities[direction as usize].chunks)
    }

    /// Whether they are in time order.
    pub fn opportunities_in_order(&self, direction: Direction) -> bool {
        self.opportunities[direction as usize].sends_in_order
    }
}

/// One stream's rows read back, in order, `READ_ROWS` at a time; after an error, nothing more.
pub struct Rows<'a, T> {
    file: &'a File,
    chunks: &'a [Chunk],
    /// Rows of `chunks[0]` read into `buffer` so far.
    done: u64,
    buffer: Vec<u8>,
    /// Where the next row is in `buffer`, and its place in its chunk.
    at: usize,
    index: u64,
    row: PhantomData<T>,
}

impl<'a, T: Row> Rows<'a, T> {
    fn new(file: &'a File, chunks: &'a [Chunk]) -> Rows<'a, T> {
        Rows { file, chunks, done: 0, buffer: Vec::new(), at: 0, index: 0, row: PhantomData }
    }

    fn refill(&mut self) -> Option<io::Result<()>> {
        while self.chunks.first()?.rows == self.done {
            self.chunks = &self.chunks[1..];
            self.done = 0;
        }
        let chunk = self.chunks[0];
        let row_bytes = chunk.row_bytes::<T>() as u64;
        let rows = (chunk.rows - self.done).min(READ_ROWS);
        self.buffer.resize((rows * row_bytes) as usize, 0);
        if let Err(e) = self.file.read_exact_at(&mut self.buffer, chunk.offset + self.done * row_bytes) {
            self.chunks = &[];
            return Some(Err(e));
        }
        self.index = self.done;
        self.done += rows;
        self.at = 0;
        Some(Ok(()))
    }
}

impl<T: Row> Rows<'_, T> {
    /// Reads the next `n` rows (fewer where the stream ends) onto `out`, in bulk: a row group's
    /// worth at a time (records.rs), where the iterator's pace per row would show.
    pub fn read_into(&mut self, mut n: u64, out: &mut Vec<T>) -> io::Result<()> {
        while n > 0 {
            if self.at == self.buffer.len() {
                match self.refill() {
                    None => return Ok(()),
                    Some(result) => result?,
                }
            }
            let chunk = &self.chunks[0];
            let row_bytes = chunk.row_bytes::<T>();
            let rows = ((self.buffer.len() - self.at) / row_bytes).min(n as usize);
            let bytes = &self.buffer[self.at..self.at + rows * row_bytes];
            let (narrow, first_uid, index) = (chunk.narrow, chunk.first_uid, self.index);
            out.extend(bytes.chunks_exact(row_bytes).zip(index..).map(|(row, i)| T::decode(row, narrow, first_uid, i)));
            self.at += rows * row_bytes;
            self.index += rows as u64;
            n -= rows as u64;
        }
        Ok(())
    }
}

impl<T: Row> Iterator for Rows<'_, T> {
    type Item = io::Result<T>;

    fn next(&mut self) -> Option<io::Result<T>> {
        if self.at == self.buffer.len() {
            if let Err(e) = self.refill()? {
                return Some(Err(e));
            }
        }
        let chunk = &self.chunks[0];
        let row_bytes = chunk.row_bytes::<T>();
        let row = T::decode(&self.buffer[self.at..self.at + row_bytes], chunk.narrow, chunk.first_uid, self.index);
        self.at += row_bytes;
        self.index += 1;
        Some(Ok(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crossing(uid: u64, send_us: u64, recv_us: Option<u64>) -> Crossing {
        Crossing { uid, send_us, recv_us, ecn: Ecn::Ect0, ce: recv_us == Some(7) }
    }

    #[test]
    fn streams_read_back_in_order_across_chunks_and_pieces_from_a_file_without_a_name() {
        let dir = std::env::temp_dir().join(format!("pantheon-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut spill = Spill::create(&dir, 2).unwrap();
        assert!(!dir.join(SPILL_NAME).exists());
        // Flow 1's acknowledgements in four chunks, between chunks of other streams: narrow, one
        // longer than a reader's piece, one wide for its gap in uids, one wide for its late time.
        let long: Vec<Crossing> = (1..=READ_ROWS + 5).map(|uid| crossing(uid, uid * 10, None)).collect();
        let gap = [crossing(READ_ROWS + 6, 1, Some(3)), crossing(READ_ROWS + 8, 2, Some(7))];
        let late = [crossing(READ_ROWS + 9, 1 << 33, Some((1 << 33) + 5))];
        spill.crossings(1, Way::Ack, &[crossing(0, 5, Some(7))]);
        spill.opportunities(Direction::Downlink, &[3, 2]);
        spill.crossings(0, Way::Data, &[crossing(0, 1, Some(9))]);
        spill.crossings(1, Way::Ack, &long);
        spill.crossings(1, Way::Ack, &gap);
        spill.opportunities(Direction::Downlink, &[1 << 40]);
        spill.crossings(1, Way::Ack, &late);
        let spilled = spill.finish().unwrap();
        let narrow: Vec<bool> = spilled.stream(1, Way::Ack).chunks.iter().map(|c| c.narrow).collect();
        assert_eq!(narrow, [true, true, false, false]);
        let acks: Vec<Crossing> = spilled.crossings(1, Way::Ack).map(Result::unwrap).collect();
        assert_eq!(spilled.rows(1, Way::Ack), READ_ROWS + 9);
        let expected: Vec<Crossing> =
            [&[crossing(0, 5, Some(7))][..], &long, &gap, &late].into_iter().flatten().copied().collect();
        assert_eq!(acks, expected);
        assert!(acks[0].ce && acks[0].ecn == Ecn::Ect0);
        assert_eq!(spilled.in_order(1, Way::Ack), (false, false), "sent at 1 after 10 (2053), arrived at 3 after 7");
        assert_eq!(spilled.in_order(0, Way::Data), (true, true));
        assert_eq!(spilled.crossings(0, Way::Ack).count(), 0);
        let opportunities: Vec<u64> = spilled.opportunities_us(Direction::Downlink).map(Result::unwrap).collect();
        assert_eq!((opportunities, spilled.opportunities_in_order(Direction::Downlink)), (vec![3, 2, 1 << 40], false));
        drop(spilled);
        std::fs::remove_dir(&dir).unwrap();
    }
}
