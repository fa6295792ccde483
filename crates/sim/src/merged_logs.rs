//! `datalink.log` and `acklink.log`: the original Pantheon's merged text logs (Yan et al., ATC
//! 2018, §3.2), written from a run's records byte for byte as the harness's record merge writes
//! them (python/pantheon/harness/records.py), so that `pantheon analyze` finds the link's
//! capacity (the `#` lines) where it looks for it and a researcher the files the original wrote.
//!
//! Lines, in ms since the run's start with three decimals, flows numbered from 1:
//! `t + size flow` (a datagram entered the tunnel), `t - size delay flow` (one left it, `delay`
//! ms after it entered), `t # 1500` (a delivery opportunity of the path in that direction).
//! They are in time order; lines of the same µs keep the merge's order: by flow, then by the
//! datagram's place in its flow (its arrival right after its entry), opportunities last.
//!
//! They are written from the run's spill (spill.rs) as a merge of runs already in time order
//! (each flow's entries, each flow's arrivals, the opportunities), each read back as the merge
//! goes, so the memory does not grow with the run; a run the spill's index says is out of order
//! (a path that reorders a flow's datagrams) is read whole and sorted first.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path as FsPath;

use pantheon_format::line::LineBuffer;

use crate::crossing::{Crossing, Way};
use crate::observer::Direction;
use crate::simulation::{ACK_INNER_BYTES, DATA_INNER_BYTES};
use crate::spill::Spilled;

/// Bytes of a delivery opportunity, as the original's logs give it.
const OPPORTUNITY_BYTES: u32 = 1500;
/// A line's place among those of its µs: flow (16 bits), datagram index (46), arrival (1).
const FLOW_SHIFT: u32 = 47;
/// The place of an opportunity: after every datagram's lines.
const OPPORTUNITY: u64 = u64::MAX;

/// Writes `datalink.log` into `dir`.
pub fn write_data(dir: &FsPath, spilled: &Spilled) -> io::Result<()> {
    write_direction(&dir.join("datalink.log"), spilled, Way::Data, Direction::Uplink, DATA_INNER_BYTES)
}

/// Writes `acklink.log` into `dir`.
pub fn write_acks(dir: &FsPath, spilled: &Spilled) -> io::Result<()> {
    write_direction(&dir.join("acklink.log"), spilled, Way::Ack, Direction::Downlink, ACK_INNER_BYTES)
}

/// A line: its µs, its place among the lines of that µs, and for an arrival when the datagram
/// was sent.
type Line = (u64, u64, u64);
/// A run of lines in time order.
type Run<'a> = Box<dyn Iterator<Item = io::Result<Line>> + 'a>;

/// `run` as it is when `sorted`, else read whole and sorted (a path that reorders a flow's
/// datagrams: its lines are held in memory, 24 bytes each).
fn in_order<'a>(run: impl Iterator<Item = io::Result<Line>> + 'a, sorted: bool) -> io::Result<Run<'a>> {
    if sorted {
        Ok(Box::new(run))
    } else {
        let mut lines = run.collect::<io::Result<Vec<Line>>>()?;
        lines.sort_unstable();
        Ok(Box::new(lines.into_iter().map(Ok)))
    }
}

/// The two runs of flow `flow`'s datagrams, each read from `crossings()`: their entries, and
/// their arrivals; `(sends, arrivals)` say which are in time order already.
fn flow_runs<'a, I>(flow: usize, crossings: impl Fn() -> I, (sends, arrivals): (bool, bool)) -> io::Result<[Run<'a>; 2]>
where
    I: Iterator<Item = io::Result<Crossing>> + 'a,
{
    let base = (flow as u64) << FLOW_SHIFT;
    let entries = crossings().enumerate().map(move |(i, c)| c.map(|c| (c.send_us, base | (i as u64) << 1, c.send_us)));
    let arrived = crossings().enumerate().filter_map(move |(i, c)| match c {
        Ok(c) => c.recv_us.map(|t| Ok((t, base | (i as u64) << 1 | 1, c.send_us))),
        Err(e) => Some(Err(e)),
    });
    Ok([in_order(entries, sends)?, in_order(arrived, arrivals)?])
}

/// A direction's opportunities as a run.
fn opportunity_run<'a>(
    opportunities_us: impl Iterator<Item = io::Result<u64>> + 'a,
    sorted: bool,
) -> io::Result<Run<'a>> {
    in_order(opportunities_us.map(|t| t.map(|t| (t, OPPORTUNITY, 0))), sorted)
}

/// Every line of the runs, in the file's order: a merge of runs each in time order (each
/// flow's entries, each flow's arrivals, the opportunities). The runs' heads wait in a binary
/// heap, so a line costs O(log runs): a run of thousands of transfers has thousands of runs.
struct Merge<'a> {
    runs: Vec<Run<'a>>,
    heads: BinaryHeap<Reverse<(Line, usize)>>,
}

impl<'a> Merge<'a> {
    fn new(mut runs: Vec<Run<'a>>) -> io::Result<Merge<'a>> {
        let mut heads = BinaryHeap::with_capacity(runs.len());
        for (r, run) in runs.iter_mut().enumerate() {
            if let Some(line) = run.next().transpose()? {
                heads.push(Reverse((line, r)));
            }
        }
        Ok(Merge { runs, heads })
    }

    fn next(&mut self) -> io::Result<Option<Line>> {
        let Some(Reverse((line, r))) = self.heads.pop() else {
            return Ok(None);
        };
        if let Some(following) = self.runs[r].next().transpose()? {
            self.heads.push(Reverse((following, r)));
        }
        Ok(Some(line))
    }
}

/// The three decimals of every fraction of a ms, `000` to `999`.
const FRACTIONS: [u8; 3000] = {
    let mut digits = [0u8; 3000];
    let mut i = 0;
    while i < 1000 {
        digits[3 * i] = b'0' + (i / 100) as u8;
        digits[3 * i + 1] = b'0' + (i / 10 % 10) as u8;
        digits[3 * i + 2] = b'0' + (i % 10) as u8;
        i += 1;
    }
    digits
};
/// The same, as text.
const FRACTIONS_TEXT: &str = match std::str::from_utf8(&FRACTIONS) {
    Ok(text) => text,
    Err(_) => panic!("ASCII digits"),
};

/// `t_us` as ms with three decimals: `12.345`.
fn millis(line: &mut LineBuffer, t_us: u64) -> &mut LineBuffer {
    let fraction = (t_us % 1000) as usize;
    line.int(t_us / 1000).text(".").text(&FRACTIONS_TEXT[3 * fraction..3 * fraction + 3])
}

fn write_direction(
    path: &FsPath,
    spilled: &Spilled,
    way: Way,
    direction: Direction,
    size_bytes: u32,
) -> io::Result<()> {
    let located = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut runs = Vec::with_capacity(2 * spilled.flows() + 1);
    for flow in 0..spilled.flows() {
        runs.extend(flow_runs(flow, || spilled.crossings(flow, way), spilled.in_order(flow, way)).map_err(located)?);
    }
    runs.push(
        opportunity_run(spilled.opportunities_us(direction), spilled.opportunities_in_order(direction))
            .map_err(located)?,
    );
    let mut lines = Merge::new(runs).map_err(located)?;
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(located)?);
    let mut line = LineBuffer::default();
    out.write_all(b"# init timestamp: 0.000\n").map_err(located)?;
    while let Some((t_us, place, sent_us)) = lines.next().map_err(located)? {
        line.start();
        millis(&mut line, t_us);
        if place == OPPORTUNITY {
            line.text(" # ").int(OPPORTUNITY_BYTES);
        } else {
            let number = (place >> FLOW_SHIFT) + 1;
            if place & 1 == 0 {
                line.text(" + ").int(size_bytes).text(" ").int(number);
            } else {
                line.text(" - ").int(size_bytes).text(" ");
                millis(&mut line, t_us - sent_us).text(" ").int(number);
            }
        }
        out.write_all(line.end()).map_err(located)?;
    }
    out.flush().map_err(located)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pantheon_link::Ecn;

    #[test]
    fn millis_has_three_decimals() {
        for (t_us, text) in [(0, "0.000"), (5, "0.005"), (1_005, "1.005"), (123_456_789, "123456.789")] {
            let mut line = LineBuffer::default();
            assert_eq!(millis(line.start(), t_us).end(), format!("{text}\n").as_bytes());
        }
    }

    fn crossing(uid: u64, send_us: u64, recv_us: Option<u64>) -> Crossing {
        Crossing { uid, send_us, recv_us, ecn: Ecn::NotEct, ce: false }
    }

    /// The lines of flows with these records and of these opportunities, in order.
    fn lines(flows: &[Vec<Crossing>], opportunities_us: &[u64]) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        for (flow, crossings) in flows.iter().enumerate() {
            let sends = crossings.is_sorted_by_key(|c| c.send_us);
            let arrivals = crossings.iter().filter_map(|c| c.recv_us).is_sorted();
            runs.extend(flow_runs(flow, || crossings.iter().copied().map(Ok), (sends, arrivals)).unwrap());
        }
        runs.push(opportunity_run(opportunities_us.iter().copied().map(Ok), opportunities_us.is_sorted()).unwrap());
        let mut merge = Merge::new(runs).unwrap();
        std::iter::from_fn(|| merge.next().unwrap().map(|(t, place, _)| (t, place))).collect()
    }

    #[test]
    fn a_run_out_of_order_is_sorted() {
        let reordered = vec![crossing(0, 10, Some(40)), crossing(1, 11, Some(30))];
        assert_eq!(lines(&[reordered], &[]), [(10, 0), (11, 2), (30, 3), (40, 1)]);
    }

    #[test]
    fn ties_keep_the_merges_order() {
        // Flow 1 sends at 10 and 20 µs, the first arrives at 20; flow 0 sends at 20; an opportunity at 20.
        let zero = vec![crossing(0, 20, None)];
        let one = vec![crossing(0, 10, Some(20)), crossing(1, 20, None)];
        let one_base = 1 << FLOW_SHIFT;
        assert_eq!(
            lines(&[zero, one], &[20]),
            [(10, one_base), (20, 0), (20, one_base | 1), (20, one_base | 2), (20, OPPORTUNITY)]
        );
    }
}
