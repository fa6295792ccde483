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
//! The observer also keeps each direction's delivery opportunities, from which the merged text
//! logs (merged_logs.rs) give the analysis the link's capacity.

use std::fs::File;
use std::io::{self, BufWriter};
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

use crate::observer::{Direction, Observer};
use crate::simulation::{ACK_INNER_BYTES, DATA_INNER_BYTES};

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

/// The datagrams of one flow in one direction, in the order they entered the tunnel.
#[derive(Debug, Default)]
pub struct Crossings {
    /// The tunnel's id of each: the sequence number for data, the acknowledgement's own number
    /// for acknowledgements; increasing.
    pub uid: Vec<u64>,
    /// When it entered the tunnel, µs since the run's start.
    pub send_us: Vec<u64>,
    /// When it left the tunnel at the other end, µs; `None`: lost or still in flight at the end.
    pub recv_us: Vec<Option<u64>>,
    /// The ECN codepoint it was sent with.
    pub ecn: Vec<Ecn>,
    /// It arrived marked CE (meaningful where `recv_us` is set).
    pub ce: Vec<bool>,
}

impl Crossings {
    fn sent(&mut self, uid: u64, t_us: u64, ecn: Ecn) {
        self.uid.push(uid);
        self.send_us.push(t_us);
        self.recv_us.push(None);
        self.ecn.push(ecn);
        self.ce.push(false);
    }

    /// Records the arrival of `uid`; a later arrival of the same uid replaces an earlier one and
    /// one never sent is left out, as records.py does.
    fn received(&mut self, uid: u64, t_us: u64, ce: bool) {
        // uids count up from the first one sent, so the index is usually the difference.
        let guess = self.uid.first().map_or(0, |first| uid.wrapping_sub(*first) as usize);
        let index = if self.uid.get(guess) == Some(&uid) { Some(guess) } else { self.uid.binary_search(&uid).ok() };
        if let Some(i) = index {
            self.recv_us[i] = Some(t_us);
            self.ce[i] = ce;
        }
    }

    pub fn len(&self) -> usize {
        self.uid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.uid.is_empty()
    }
}

/// One flow's records.
#[derive(Debug, Default)]
pub struct FlowRecords {
    pub data: Crossings,
    pub acks: Crossings,
}

/// The observer that keeps every datagram's crossing and every delivery opportunity.
#[derive(Debug)]
pub struct Records {
    /// Per flow, numbered from 0.
    pub flows: Vec<FlowRecords>,
    /// The uplink's delivery opportunities, µs, in time order.
    pub uplink_opportunities_us: Vec<u64>,
    /// The downlink's.
    pub downlink_opportunities_us: Vec<u64>,
}

impl Records {
    pub fn new(flows: usize) -> Records {
        Records {
            flows: (0..flows).map(|_| FlowRecords::default()).collect(),
            uplink_opportunities_us: Vec::new(),
            downlink_opportunities_us: Vec::new(),
        }
    }

    /// Writes `records.parquet` into `dir`.
    pub fn write_parquet(&self, dir: &FsPath) -> io::Result<()> {
        let properties = integer_properties()
            .set_column_dictionary_enabled(ColumnPath::from(TEXT_COLUMN), true)
            .set_column_encoding(ColumnPath::from(TEXT_COLUMN), Encoding::PLAIN)
            .set_column_encoding(ColumnPath::from(BOOL_COLUMN), Encoding::PLAIN)
            .build();
        let chunks: Vec<(u16, &str, u32, &Crossings)> = self
            .flows
            .iter()
            .enumerate()
            .flat_map(|(i, f)| {
                [(i as u16, "data", DATA_INNER_BYTES, &f.data), (i as u16, "ack", ACK_INNER_BYTES, &f.acks)]
            })
            .collect();
        let longest = chunks.iter().map(|c| c.3.len()).max().unwrap_or(0);
        let present = vec![1i16; longest];
        write_parquet_file(&dir.join("records.parquet"), SCHEMA, properties, |column, writer| {
            for &(flow, direction, size_bytes, crossings) in &chunks {
                write_column(writer, column, flow, direction, size_bytes, crossings, &present)?;
            }
            Ok(())
        })
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
    let located = |e: ParquetError| io::Error::other(format!("{}: {e}", path.display()));
    let file = File::create(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let out = BufWriter::with_capacity(1 << 20, file);
    let written = (|| {
        let schema = Arc::new(parse_message_type(schema)?);
        let mut writer = SerializedFileWriter::new(out, schema, Arc::new(properties))?;
        let mut group = writer.next_row_group()?;
        let mut index = 0;
        while let Some(mut writer) = group.next_column()? {
            column(index, &mut writer)?;
            writer.close()?;
            index += 1;
        }
        group.close()?;
        writer.close()?;
        Ok(())
    })();
    written.map_err(located)
}

/// Column `column` (in SCHEMA's order) of one flow and direction; `present` holds at least one
/// definition level of 1 (a value) per row.
fn write_column(
    writer: &mut SerializedColumnWriter<'_>,
    column: usize,
    flow: u16,
    direction: &str,
    size_bytes: u32,
    crossings: &Crossings,
    present: &[i16],
) -> Result<(), ParquetError> {
    let rows = crossings.len();
    let levels = Some(&present[..rows]);
    // recv_us and ce are null where the datagram never arrived.
    let defined: Vec<i16> = crossings.recv_us.iter().map(|t| i16::from(t.is_some())).collect();
    // Parquet stores unsigned integers in the signed physical type of their width, bit for bit.
    let int64 = |values: &[u64]| values.iter().map(|&v| v as i64).collect::<Vec<i64>>();
    match column {
        0 => writer.typed::<Int32Type>().write_batch(&vec![i32::from(flow); rows], levels, None),
        1 => writer.typed::<ByteArrayType>().write_batch(&vec![ByteArray::from(direction); rows], levels, None),
        2 => writer.typed::<Int64Type>().write_batch(&int64(&crossings.uid), levels, None),
        3 => writer.typed::<Int32Type>().write_batch(&vec![size_bytes as i32; rows], levels, None),
        4 => writer.typed::<Int64Type>().write_batch(&int64(&crossings.send_us), levels, None),
        5 => {
            let received: Vec<i64> = crossings.recv_us.iter().flatten().map(|&t| t as i64).collect();
            writer.typed::<Int64Type>().write_batch(&received, Some(&defined), None)
        }
        6 => {
            let ecn: Vec<i32> = crossings.ecn.iter().map(|e| i32::from(e.bits())).collect();
            writer.typed::<Int32Type>().write_batch(&ecn, levels, None)
        }
        _ => {
            let arrived = crossings.recv_us.iter().zip(&crossings.ce).filter(|(t, _)| t.is_some());
            let ce: Vec<bool> = arrived.map(|(_, &ce)| ce).collect();
            writer.typed::<BoolType>().write_batch(&ce, Some(&defined), None)
        }
    }
    .map(drop)
}

impl Observer for Records {
    fn records_link(&self) -> bool {
        true
    }

    fn data_sent(&mut self, flow: usize, uid: u64, t_us: u64, ecn: Ecn) {
        self.flows[flow].data.sent(uid, t_us, ecn);
    }

    fn data_received(&mut self, flow: usize, uid: u64, t_us: u64, _sent_us: u64, ecn: Ecn) {
        self.flows[flow].data.received(uid, t_us, ecn == Ecn::Ce);
    }

    fn ack_sent(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.flows[flow].acks.sent(uid, t_us, Ecn::NotEct);
    }

    fn ack_received(&mut self, flow: usize, uid: u64, t_us: u64) {
        self.flows[flow].acks.received(uid, t_us, false);
    }

    fn link_opportunity(&mut self, direction: Direction, t_us: u64) {
        match direction {
            Direction::Uplink => self.uplink_opportunities_us.push(t_us),
            Direction::Downlink => self.downlink_opportunities_us.push(t_us),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_find_their_datagram_and_strays_are_left_out() {
        let mut c = Crossings::default();
        for (uid, t_us) in [(5, 10), (6, 11), (8, 12)] {
            c.sent(uid, t_us, Ecn::Ect0);
        }
        c.received(8, 40, true);
        c.received(6, 30, false);
        c.received(6, 31, false);
        c.received(7, 50, true);
        assert_eq!(c.recv_us, [None, Some(31), Some(40)]);
        assert_eq!(c.ce, [false, false, true]);
    }
}
