//! A datagram's crossing of the tunnel, a row of records.parquet, and where the final ones go
//! (records.rs keeps each stream's until they are final, then hands them to a `Store`: memory, or
//! the spill of spill.rs).

use pantheon_link::Ecn;

use crate::observer::Direction;
use crate::simulation::{ACK_INNER_BYTES, DATA_INNER_BYTES};

/// Which of a flow's two streams: its data, or its acknowledgements (records.parquet's
/// `direction`, `data` and `ack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Data = 0,
    Ack = 1,
}

impl Way {
    /// The way of stream `stream`, as streams are numbered here: 2 × flow + way.
    pub fn of_stream(stream: usize) -> Way {
        [Way::Data, Way::Ack][stream % 2]
    }

    /// The `direction` column's value.
    pub fn name(self) -> &'static str {
        match self {
            Way::Data => "data",
            Way::Ack => "ack",
        }
    }

    /// The datagram's size inside the tunnel (the `size_bytes` column).
    pub fn size_bytes(self) -> u32 {
        match self {
            Way::Data => DATA_INNER_BYTES,
            Way::Ack => ACK_INNER_BYTES,
        }
    }
}

/// One datagram's crossing of the tunnel: a row of records.parquet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crossing {
    /// The tunnel's id: the sequence number for data, the acknowledgement's own number for
    /// acknowledgements; increasing in its stream.
    pub uid: u64,
    /// When it entered the tunnel, µs since the run's start.
    pub send_us: u64,
    /// When it left the tunnel at the other end, µs; `None`: lost or still in flight at the end.
    pub recv_us: Option<u64>,
    /// The ECN codepoint it was sent with.
    pub ecn: Ecn,
    /// It arrived marked CE (meaningful where `recv_us` is set).
    pub ce: bool,
}

/// Where final records and opportunities go, each stream's in order.
pub trait Store {
    /// The next final records of `flow`'s `way`.
    fn crossings(&mut self, flow: usize, way: Way, rows: &[Crossing]);
    /// The next delivery opportunities of `direction`, µs, as the path reported them.
    fn opportunities(&mut self, direction: Direction, t_us: &[u64]);
}
