//! A run's per-packet records, written as `records.parquet` straight from the simulation: the
//! file the harness builds from the tunnel logs (python/pantheon/harness/records.py) and
//! `pantheon analyze` reads, so a simulated run needs no text logs and no Python merge (issue 14
//! §6: the text logs and their merge took 12 of the 13 s of a 600 s run at 12 Mbit/s).
//!
//! The file has the harness's rows, in its order and with its Arrow types: per flow (numbered
//! from 0), its data datagrams then its acknowledgements, each in the order they entered the
//! tunnel; columns `flow` (uint16), `direction` (`data` | `ack`), `uid` (uint64), `size_bytes`
//! (uint32, the inner datagram), `send_us` (int64), `recv_us` (int64, null: lost or still in
//! flight at the end), `ecn` (uint8: the ECN codepoint sent, RFC 3168's two bits), `ce` (bool:
//! it arrived marked CE; null when `recv_us` is), every column nullable as pyarrow writes them. Times are µs since the run's
//! start. The bytes differ from pyarrow's (no zstd, no statistics: the integer columns are
//! delta-encoded instead, which without a compression crate keeps the file at a fifth of
//! pyarrow's, 1.6 MB against 7.6 MB for 600 s at 12 Mbit/s); the values are equal
//! (tests/test_sim.py holds them so).
//!
//! Memory (issue 36 §4). A record is final once its datagram has left the tunnel at the other
//! end, or never will: a link dropped it, or (an acknowledgement) it would leave after the run's
//! end (`Observer::data_lost`, `ack_lost`: the simulation knows). A flow's records in one way are
//! made in uid order, and each such stream keeps a `Window`: its records from the oldest one not
//! final to the newest, a deque. Final records leave the window's front, in order, for a `Store`
//! once `CHUNK_ROWS` of them wait (or `BUFFER_ROWS` over all streams, or at the run's end, when
//! what is still in flight leaves with `recv_us` null). `pantheon-sim run`'s store is the spill
//! (spill.rs): a file in the run's directory, nameless from its creation on so that nothing is
//! left whatever happens, from which records.parquet and the merged logs (merged_logs.rs) are
//! written once the run ends, records.parquet in row groups of at most `ROW_GROUP_ROWS` rows. So a
//! run holds the records of datagrams in flight (bounded by the path's queues and delays, and by
//! simulation.rs's `MAX_PACKETS_INSIDE`) and buffers of fixed size, the largest a row group, not
//! every datagram's record (34 bytes a datagram each way, and 8 a delivery opportunity, until
//! issue 36): 60 s of Cubic at 1 Gbit/s peaked at 593 MB of RSS before, 97 MB now (docs/sim.md,
//! "Memory of `run`"). A run of at most `ROW_GROUP_ROWS` records writes the same file, byte for
//! byte, as when it kept them all; a longer one the same rows in more groups. Tests
//! keep the records in memory instead (`Memory`), through the same windows.
//!
//! The observer also passes on each direction's delivery opportunities, from which the merged
//! text logs give the analysis the link's capacity: to the store as well, `CHUNK_ROWS` at a time.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter};
use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::Arc;

use parquet::basic::Encoding;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::file::writer::{SerializedColumnWriter, SerializedFileWriter};
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;

use pantheon_link::Ecn;

use crate::crossing::{Crossing, Store, Way};
use crate::observer::{Direction, Observer};
use crate::spill::{Rows, Spill, Spilled};

/// The harness's schema (records.py's SCHEMA) in Parquet's terms: the logical types are those
/// pyarrow maps back to uint16, string, uint64, uint32, uint8 and bool.
const SCHEMA: &str = "message schema {
    optional int32 flow (INTEGER(16, false));
    optional binary direction (STRING);
    optional int64 uid (INTEGER(64, false));
    optional int32 size_bytes (INTEGER(32, false));
    optional int64 send_us;
    optional int64 recv_us;
    optional int32 ecn (INTEGER(8, false));
    optional boolean ce;
}";
/// The one column that is text, dictionary-encoded (two values, so its PLAIN fallback never comes
/// into play; 20% faster to write than DELTA_BYTE_ARRAY). The others are integers that, within a
/// flow and direction, stay the same (flow, size) or grow by small steps (uid, times): delta
/// encoding stores them in a few bits a row, without a dictionary's hashing of every value.
const TEXT_COLUMN: &str = "direction";
/// The one boolean column, PLAIN (bit-packed; delta encoding is for integers).
const BOOL_COLUMN: &str = "ce";
/// Final records a stream's window keeps before handing them to the store (and opportunities a
/// direction keeps): 4096 records are 106 kB of the spill, written at once.
const CHUNK_ROWS: usize = 4096;
/// Final records all windows together keep before every window hands its own over: the bound
/// when many flows each keep fewer than `CHUNK_ROWS` (2.6 MB in memory).
const BUFFER_ROWS: usize = 1 << 16;
/// Rows of a row group of records.parquet: one group's records are in memory while it is
/// written (42 MB); a run of no more records has one group, as it always had.
const ROW_GROUP_ROWS: u64 = 1 << 20;

/// One stream's records from the oldest not final to the newest, in the order they entered the
/// tunnel (sans-IO: what leaves it goes to a `Store`).
#[derive(Debug, Default)]
pub struct Window {
    pending: VecDeque<Crossing>,
    /// Whether each of `pending` is final.
    done: VecDeque<bool>,
    /// How many records at the front are final: those that may leave.
    final_rows: usize,
}

impl Window {
    fn sent(&mut self, uid: u64, t_us: u64, ecn: Ecn) {
        self.pending.push_back(Crossing { uid, send_us: t_us, recv_us: None, ecn, ce: false });
        self.done.push_back(false);
    }

    /// The place of `uid` in the window, if it is there: one that left is final already (the
    /// path neither duplicates nor resends a datagram), and one never sent is left out, as
    /// records.py does.
    fn find(&self, uid: u64) -> Option<usize> {
        // uids count up from the first one sent, so the place is usually the difference.
        let guess = uid.wrapping_sub(self.pending.front()?.uid) as usize;
        match self.pending.get(guess) {
            Some(c) if c.uid == uid => Some(guess),
            _ => self.pending.binary_search_by_key(&uid, |c| c.uid).ok(),
        }
    }

    /// Records the arrival of `uid`, which makes its record final; how many records became
    /// ready to leave.
    fn received(&mut self, uid: u64, t_us: u64, ce: bool) -> usize {
        let Some(i) = self.find(uid) else { return 0 };
        let crossing = &mut self.pending[i];
        crossing.recv_us = Some(t_us);
        crossing.ce = ce;
        self.done[i] = true;
        self.advance()
    }

    /// Records that `uid` will never arrive; as `received`.
    fn lost(&mut self, uid: u64) -> usize {
        let Some(i) = self.find(uid) else { return 0 };
        self.done[i] = true;
        self.advance()
    }

    /// Moves the front's count of final records past those that just became final.
    fn advance(&mut self) -> usize {
        let before = self.final_rows;
        while self.done.get(self.final_rows).is_some_and(|&done| done) {
            self.final_rows += 1;
        }
        self.final_rows - before
    }

    /// Hands the final records at the front to `store`, in order; how many.
    fn release(&mut self, store: &mut impl Store, flow: usize, way: Way) -> usize {
        let n = std::mem::take(&mut self.final_rows);
        let (front, back) = self.pending.as_slices();
        let in_front = n.min(front.len());
        for rows in [&front[..in_front], &back[..n - in_front]] {
            if !rows.is_empty() {
                store.crossings(flow, way, rows);
            }
        }
        self.pending.drain(..n);
        self.done.drain(..n);
        n
    }

    /// At the run's end: every record is final (one in flight never arrived).
    fn close(&mut self) {
        self.final_rows = self.pending.len();
    }
}

/// The datagrams of one flow in one way, in the order they entered the tunnel, as columns.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Crossings {
    pub uid: Vec<u64>,
    pub send_us: Vec<u64>,
    pub recv_us: Vec<Option<u64>>,
    pub ecn: Vec<Ecn>,
    pub ce: Vec<bool>,
}

impl Crossings {
    pub fn len(&self) -> usize {
        self.uid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uid.is_empty()
    }
}

/// One flow's records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FlowRecords {
    pub data: Crossings,
    pub acks: Crossings,
}

/// The store that keeps everything in memory: the tests'.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Per flow, numbered from 0.
    pub flows: Vec<FlowRecords>,
    /// The uplink's delivery opportunities, µs, in time order.
    pub uplink_opportunities_us: Vec<u64>,
    /// The downlink's.
    pub downlink_opportunities_us: Vec<u64>,
}

impl Store for Memory {
    fn crossings(&mut self, flow: usize, way: Way, rows: &[Crossing]) {
        let flow = &mut self.flows[flow];
        let columns = match way {
            Way::Data => &mut flow.data,
            Way::Ack => &mut flow.acks,
        };
        for c in rows {
            columns.uid.push(c.uid);
            columns.send_us.push(c.send_us);
            columns.recv_us.push(c.recv_us);
            columns.ecn.push(c.ecn);
            columns.ce.push(c.ce);
        }
    }

    fn opportunities(&mut self, direction: Direction, t_us: &[u64]) {
        match direction {
            Direction::Uplink => self.uplink_opportunities_us.extend_from_slice(t_us),
            Direction::Downlink => self.downlink_opportunities_us.extend_from_slice(t_us),
        }
    }
}

/// The observer of a run's records: each stream's window, and where final records go.
#[derive(Debug)]
pub struct Records<S: Store> {
    /// Per flow, its data's window then its acknowledgements'.
    windows: Vec<Window>,
    /// Final records the windows keep, all together.
    final_rows: usize,
    /// Opportunities not handed over yet, the uplink's then the downlink's.
    opportunities_us: [Vec<u64>; 2],
    store: S,
}

impl Records<Memory> {
    /// Records of `flows` flows kept in memory.
    pub fn new(flows: usize) -> Records<Memory> {
        let memory = Memory { flows: (0..flows).map(|_| FlowRecords::default()).collect(), ..Memory::default() };
        Records::with_store(flows, memory)
    }
}

impl Records<Spill> {
    /// Records of `flows` flows spilled into `dir` (spill.rs).
    pub fn spilling(flows: usize, dir: &FsPath) -> io::Result<Records<Spill>> {
        Ok(Records::with_store(flows, Spill::create(dir, flows)?))
    }
}

impl<S: Store> Records<S> {
    fn with_store(flows: usize, store: S) -> Records<S> {
        Records {
            windows: (0..2 * flows).map(|_| Window::default()).collect(),
            final_rows: 0,
            opportunities_us: [Vec::new(), Vec::new()],
            store,
        }
    }

    /// After `ready` records of `flow`'s `way` became final: hands over that window's, or all,
    /// when they are many.
    fn made_final(&mut self, flow: usize, way: Way, ready: usize) {
        self.final_rows += ready;
        let i = 2 * flow + way as usize;
        if self.windows[i].final_rows >= CHUNK_ROWS {
            self.final_rows -= self.windows[i].release(&mut self.store, flow, way);
        }
        if self.final_rows > BUFFER_ROWS {
            for (i, window) in self.windows.iter_mut().enumerate() {
                let way = Way::of_stream(i);
                window.release(&mut self.store, i / 2, way);
            }
            self.final_rows = 0;
        }
    }

    /// Ends the run: every record, in flight ones included, and every opportunity goes to the
    /// store, which is returned.
    pub fn finish(mut self) -> S {
        for (i, window) in self.windows.iter_mut().enumerate() {
            window.close();
            let way = Way::of_stream(i);
            window.release(&mut self.store, i / 2, way);
        }
        for (direction, t_us) in [Direction::Uplink, Direction::Downlink].into_iter().zip(&self.opportunities_us) {
            self.store.opportunities(direction, t_us);
        }
        self.store
    }
}

/// Writes `records.parquet` into `dir` from `spilled`, in row groups of at most `ROW_GROUP_ROWS`.
pub fn write_parquet(spilled: &Spilled, dir: &FsPath) -> io::Result<()> {
    write_parquet_in_groups(spilled, dir, ROW_GROUP_ROWS)
}

/// `write_parquet`, in row groups of at most `group_rows` rows.
fn write_parquet_in_groups(spilled: &Spilled, dir: &FsPath, group_rows: u64) -> io::Result<()> {
    let properties = integer_properties()
        .set_column_dictionary_enabled(ColumnPath::from(TEXT_COLUMN), true)
        .set_column_encoding(ColumnPath::from(TEXT_COLUMN), Encoding::PLAIN)
        .set_column_encoding(ColumnPath::from(BOOL_COLUMN), Encoding::PLAIN)
        .build();
    let mut groups = Groups::new(spilled, group_rows);
    let path = dir.join("records.parquet");
    let mut group = Group::default();
    let fill = |group: &mut Group| groups.fill(group);
    write_parquet_groups(&path, SCHEMA, properties, &mut group, fill, |group, column, writer| {
        let longest = group.segments.iter().map(|s| s.rows.len()).max().unwrap_or(0);
        let present = vec![1i16; longest];
        for segment in &group.segments {
            write_column(writer, column, segment, &group.rows[segment.rows.clone()], &present)?;
        }
        Ok(())
    })
}

/// One row group of records.parquet: its rows, and which stream each run of them belongs to.
/// One is reused for every group, so that the rows' room (42 MB) is allocated once.
#[derive(Default)]
struct Group {
    rows: Vec<Crossing>,
    segments: Vec<Segment>,
}

/// A stream's rows in a row group.
struct Segment {
    flow: u16,
    way: Way,
    rows: Range<usize>,
}

/// records.parquet's row groups, read off the spill: the streams in the file's order (per flow,
/// its data then its acknowledgements), cut every `group_rows` rows.
struct Groups<'a> {
    spilled: &'a Spilled,
    /// The stream being read (2 × flow + way), its reader and its rows still to read.
    stream: usize,
    reader: Option<Rows<'a, Crossing>>,
    left: u64,
    /// Whether a group was made: the first one is, even without rows.
    started: bool,
    group_rows: u64,
}

impl<'a> Groups<'a> {
    fn new(spilled: &'a Spilled, group_rows: u64) -> Groups<'a> {
        Groups { spilled, stream: 0, reader: None, left: 0, started: false, group_rows }
    }

    /// Fills `group` with the next group; false after the last. Each stream it reaches gives it
    /// a segment (one of no rows for a stream without any, as when the file was written in one
    /// group), and a full group takes the empty streams right after it too.
    fn fill(&mut self, group: &mut Group) -> io::Result<bool> {
        let streams = 2 * self.spilled.flows();
        if self.started && self.stream >= streams {
            return Ok(false);
        }
        self.started = true;
        group.rows.clear();
        group.segments.clear();
        let mut room = self.group_rows;
        while self.stream < streams {
            let (flow, way) = (self.stream / 2, Way::of_stream(self.stream));
            if self.reader.is_none() {
                self.reader = Some(self.spilled.crossings(flow, way));
                self.left = self.spilled.rows(flow, way);
            }
            if room == 0 && self.left > 0 {
                break;
            }
            let take = self.left.min(room);
            let start = group.rows.len();
            group.rows.reserve(take as usize);
            self.reader.as_mut().expect("set above").read_into(take, &mut group.rows)?;
            if (group.rows.len() - start) as u64 != take {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the records' spill ended early"));
            }
            group.segments.push(Segment { flow: flow as u16, way, rows: start..group.rows.len() });
            room -= take;
            self.left -= take;
            if self.left == 0 {
                self.stream += 1;
                self.reader = None;
            }
        }
        Ok(true)
    }
}

/// The writer's settings for a file of integers: no statistics, no dictionaries, delta encoding
/// (the module's header says why); a file with other columns sets theirs on top.
pub fn integer_properties() -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::None)
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::DELTA_BINARY_PACKED)
}

/// Writes `path`, a Parquet file of one row group of `schema` (Parquet's message syntax), each
/// column written in full by `column(index in the schema, its writer)`. Errors name the file.
pub fn write_parquet_file(
    path: &FsPath,
    schema: &str,
    properties: WriterProperties,
    mut column: impl FnMut(usize, &mut SerializedColumnWriter<'_>) -> Result<(), ParquetError>,
) -> io::Result<()> {
    let mut first = true;
    let once = |(): &mut ()| Ok(std::mem::take(&mut first));
    write_parquet_groups(path, schema, properties, &mut (), once, |(), index, writer| column(index, writer))
}

/// Writes `path`, a Parquet file of `schema` with a row group each time `fill` makes `group` the
/// next one (until it says there is none), each column of a group written in full by
/// `column(group, index in the schema, its writer)`. Errors name the file.
pub fn write_parquet_groups<G>(
    path: &FsPath,
    schema: &str,
    properties: WriterProperties,
    group: &mut G,
    mut fill: impl FnMut(&mut G) -> io::Result<bool>,
    mut column: impl FnMut(&G, usize, &mut SerializedColumnWriter<'_>) -> Result<(), ParquetError>,
) -> io::Result<()> {
    let located = |e: ParquetError| io::Error::other(format!("{}: {e}", path.display()));
    let file = File::create(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let out = BufWriter::with_capacity(1 << 20, file);
    let written = (|| {
        let schema = Arc::new(parse_message_type(schema)?);
        let mut writer = SerializedFileWriter::new(out, schema, Arc::new(properties))?;
        while fill(group).map_err(|e| ParquetError::External(Box::new(e)))? {
            let mut row_group = writer.next_row_group()?;
            let mut index = 0;
            while let Some(mut writer) = row_group.next_column()? {
                column(group, index, &mut writer)?;
                writer.close()?;
                index += 1;
            }
            row_group.close()?;
        }
        writer.close()?;
        Ok(())
    })();
    written.map_err(located)
}

/// Column `column` (in SCHEMA's order) of one stream's rows of a group, `crossings`; `present` holds at least
/// one definition level of 1 (a value) per row.
fn write_column(
    writer: &mut SerializedColumnWriter<'_>,
    column: usize,
    segment: &Segment,
    crossings: &[Crossing],
    present: &[i16],
) -> Result<(), ParquetError> {
    let rows = crossings.len();
    let levels = Some(&present[..rows]);
    // recv_us and ce are null where the datagram never arrived.
    let defined: Vec<i16> = crossings.iter().map(|c| i16::from(c.recv_us.is_some())).collect();
    // Parquet stores unsigned integers in the signed physical type of their width, bit for bit.
    let int64 = |value: fn(&Crossing) -> u64| crossings.iter().map(|c| value(c) as i64).collect::<Vec<i64>>();
    match column {
        0 => writer.typed::<Int32Type>().write_batch(&vec![i32::from(segment.flow); rows], levels, None),
        1 => {
            writer.typed::<ByteArrayType>().write_batch(&vec![ByteArray::from(segment.way.name()); rows], levels, None)
        }
        2 => writer.typed::<Int64Type>().write_batch(&int64(|c| c.uid), levels, None),
        3 => writer.typed::<Int32Type>().write_batch(&vec![segment.way.size_bytes() as i32; rows], levels, None),
        4 => writer.typed::<Int64Type>().write_batch(&int64(|c| c.send_us), levels, None),
        5 => {
            let received: Vec<i64> = crossings.iter().filter_map(|c| c.recv_us).map(|t| t as i64).collect();
            writer.typed::<Int64Type>().write_batch(&received, Some(&defined), None)
        }
        6 => {
            let ecn: Vec<i32> = crossings.iter().map(|c| i32::from(c.ecn.bits())).collect();
            writer.typed::<Int32Type>().write_batch(&ecn, levels, None)
        }
        _ => {
            let ce: Vec<bool> = crossings.iter().filter(|c| c.recv_us.is_some()).map(|c| c.ce).collect();
            writer.typed::<BoolType>().write_batch(&ce, Some(&defined), None)
        }
    }
    .map(drop)
}

impl<S: Store> Observer for Records<S> {
    fn records_link(&self) -> bool {
        true
    }

    fn data_sent(&mut self, flow: usize, uid: u64, t_us: u64, ecn: Ecn) {
        self.windows[2 * flow].sent(uid, t_us, ecn);
    }

    fn data_received(&mut self, flow: usize, uid: u64, t_us: u64, _sent_us: u64, ecn: Ecn) {
        let ready = self.windows[2 * flow].received(uid, t_us, ecn == Ecn::Ce);
        self.made_final(flow, Way::Data, ready);
    }

    fn data_lost(&mut self, flow: usize, uid: u64) {
        let ready = self.windows[2 * flow].lost(uid);
        self.made_final(flow, Way::Data, ready);
    }

    fn ack_sent(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.windows[2 * flow + 1].sent(uid, t_us, Ecn::NotEct);
    }

    fn ack_received(&mut self, flow: usize, uid: u64, t_us: u64) {
        let ready = self.windows[2 * flow + 1].received(uid, t_us, false);
        self.made_final(flow, Way::Ack, ready);
    }

    fn ack_lost(&mut self, flow: usize, uid: u64) {
        let ready = self.windows[2 * flow + 1].lost(uid);
        self.made_final(flow, Way::Ack, ready);
    }

    fn link_opportunity(&mut self, direction: Direction, t_us: u64) {
        let kept = &mut self.opportunities_us[direction as usize];
        kept.push(t_us);
        if kept.len() >= CHUNK_ROWS {
            self.store.opportunities(direction, kept);
            kept.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_find_their_datagram_and_strays_are_left_out() {
        let mut records = Records::new(1);
        for (uid, t_us) in [(5, 10), (6, 11), (8, 12)] {
            records.data_sent(0, uid, t_us, Ecn::Ect0);
        }
        records.data_received(0, 8, 40, 12, Ecn::Ce);
        records.data_received(0, 6, 30, 11, Ecn::Ect0);
        records.data_received(0, 7, 50, 0, Ecn::Ce);
        let memory = records.finish();
        let data = &memory.flows[0].data;
        assert_eq!(data.uid, [5, 6, 8]);
        assert_eq!(data.recv_us, [None, Some(30), Some(40)]);
        assert_eq!(data.ce, [false, false, true]);
    }

    #[test]
    fn a_record_leaves_its_window_once_it_and_all_before_it_are_final() {
        let mut window = Window::default();
        let mut memory = Memory { flows: vec![FlowRecords::default()], ..Memory::default() };
        for uid in 0..4 {
            window.sent(uid, 10 * uid, Ecn::NotEct);
        }
        // 1 arrives and 2 is dropped while 0 is on its way: nothing may leave yet.
        assert_eq!((window.received(1, 15, false), window.lost(2)), (0, 0));
        assert_eq!(window.release(&mut memory, 0, Way::Ack), 0);
        // 0 arrives: 0, 1 and 2 are final, 3 is still on its way.
        assert_eq!(window.received(0, 20, true), 3);
        assert_eq!(window.release(&mut memory, 0, Way::Ack), 3);
        assert_eq!(window.pending.len(), 1);
        // The run ends with 3 in flight: it leaves without an arrival.
        window.close();
        assert_eq!(window.release(&mut memory, 0, Way::Ack), 1);
        let acks = &memory.flows[0].acks;
        assert_eq!(acks.uid, [0, 1, 2, 3]);
        assert_eq!(acks.recv_us, [Some(20), Some(15), None, None]);
        assert_eq!(acks.ce, [true, false, false, false]);
    }

    #[test]
    fn many_final_records_go_to_the_store_while_the_run_goes_on() {
        // Two flows whose data arrives at once; flow 1's first datagram is in flight throughout,
        // so its window keeps everything, while flow 0 hands its records over a chunk at a time.
        let mut records = Records::new(2);
        let rows = (BUFFER_ROWS + 10) as u64;
        for uid in 0..rows {
            records.data_sent(0, uid, uid, Ecn::NotEct);
            records.data_received(0, uid, uid + 1, uid, Ecn::NotEct);
            records.data_sent(1, uid, uid, Ecn::NotEct);
            if uid > 0 {
                records.data_received(1, uid, uid + 1, uid, Ecn::NotEct);
            }
        }
        assert_eq!(records.store.flows[0].data.len(), rows as usize / CHUNK_ROWS * CHUNK_ROWS);
        assert!(records.store.flows[1].data.is_empty());
        assert_eq!(records.windows[2].pending.len(), rows as usize);
        let memory = records.finish();
        assert_eq!(memory.flows[0].data.len(), rows as usize);
        assert_eq!(memory.flows[1].data.recv_us[..2], [None, Some(2)]);
    }

    #[test]
    fn records_parquet_in_many_row_groups_holds_the_records_kept_in_memory() {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use parquet::record::Field;

        // Three flows over a lossy path, the records kept in memory and spilled in the same run;
        // the last flow starts 10 ms before the end, so that its acknowledgements are none.
        let runtime_us = 2_000_000;
        let options: Vec<String> =
            "--delay 20 --uplink-queue droptail --uplink-queue-bytes 30000 --uplink-loss 0.01 --downlink-loss 0.01"
                .split(' ')
                .map(String::from)
                .collect();
        let flows = vec![
            crate::scenario::FlowPlan::new(1, "cubic", 0.0, None, runtime_us).unwrap(),
            crate::scenario::FlowPlan::new(2, "bbr", 0.5, None, runtime_us).unwrap(),
            crate::scenario::FlowPlan::new(3, "cubic", 1.99, None, runtime_us).unwrap(),
        ];
        let paths = crate::batch::parse_path(&options, Some(5)).unwrap();
        let scenario = crate::scenario::Scenario::new(flows, runtime_us, paths).unwrap();
        let dir = std::env::temp_dir().join(format!("pantheon-records-groups-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut observers = (Records::new(3), Records::spilling(3, &dir).unwrap());
        crate::simulation::run(&scenario, &mut observers).unwrap();
        let memory = observers.0.finish();
        let spilled = observers.1.finish().finish().unwrap();
        write_parquet_in_groups(&spilled, &dir, 1000).unwrap();
        drop(spilled);

        let mut expected = Vec::new();
        for (flow, records) in memory.flows.iter().enumerate() {
            for (way, c) in [(Way::Data, &records.data), (Way::Ack, &records.acks)] {
                for i in 0..c.len() {
                    let arrived = c.recv_us[i].is_some();
                    expected.push(vec![
                        Field::UShort(flow as u16),
                        Field::Str(way.name().to_string()),
                        Field::ULong(c.uid[i]),
                        Field::UInt(way.size_bytes()),
                        Field::Long(c.send_us[i] as i64),
                        c.recv_us[i].map_or(Field::Null, |t| Field::Long(t as i64)),
                        Field::UByte(c.ecn[i].bits()),
                        if arrived { Field::Bool(c.ce[i]) } else { Field::Null },
                    ]);
                }
            }
        }
        assert!(memory.flows[2].acks.is_empty() && !memory.flows[2].data.is_empty());
        assert!(memory.flows[0].data.recv_us.iter().any(Option::is_none), "losses");
        let reader = SerializedFileReader::new(File::open(dir.join("records.parquet")).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), expected.len().div_ceil(1000));
        let rows: Vec<Vec<Field>> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| row.unwrap().get_column_iter().map(|(_, field)| field.clone()).collect())
            .collect();
        assert_eq!(rows, expected);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
