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

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path as FsPath;

use pantheon_format::line::LineBuffer;

use crate::records::{Crossings, Records};
use crate::simulation::{ACK_INNER_BYTES, DATA_INNER_BYTES};

/// Bytes of a delivery opportunity, as the original's logs give it.
const OPPORTUNITY_BYTES: u32 = 1500;
/// A line's place among those of its µs: flow (16 bits), datagram index (46), arrival (1).
const FLOW_SHIFT: u32 = 47;
/// The place of an opportunity: after every datagram's lines.
const OPPORTUNITY: u64 = u64::MAX;

/// Writes `datalink.log` into `dir`.
pub fn write_data(dir: &FsPath, records: &Records) -> io::Result<()> {
    let data: Vec<&Crossings> = records.flows.iter().map(|f| &f.data).collect();
    write_direction(&dir.join("datalink.log"), &data, DATA_INNER_BYTES, &records.uplink_opportunities_us)
}

/// Writes `acklink.log` into `dir`.
pub fn write_acks(dir: &FsPath, records: &Records) -> io::Result<()> {
    let acks: Vec<&Crossings> = records.flows.iter().map(|f| &f.acks).collect();
    write_direction(&dir.join("acklink.log"), &acks, ACK_INNER_BYTES, &records.downlink_opportunities_us)
}

/// A run of lines already in time order.
type Run<'a> = Box<dyn Iterator<Item = (u64, u64)> + 'a>;

/// `run` as it is when it is in time order, else sorted (a path that reorders).
fn in_order<'a>(run: impl Iterator<Item = (u64, u64)> + Clone + 'a) -> Run<'a> {
    if run.clone().is_sorted() {
        Box::new(run)
    } else {
        let mut sorted: Vec<_> = run.collect();
        sorted.sort_unstable();
        Box::new(sorted.into_iter())
    }
}

/// `(t_us, place)` of every line, in the file's order: a merge of the runs that are in time order
/// already (each flow's entries, each flow's arrivals on a FIFO path, the opportunities).
fn lines_in_order<'a>(flows: &[&'a Crossings], opportunities_us: &'a [u64]) -> impl Iterator<Item = (u64, u64)> + 'a {
    let mut runs: Vec<Run<'a>> = Vec::with_capacity(2 * flows.len() + 1);
    for (flow, crossings) in flows.iter().enumerate() {
        let base = (flow as u64) << FLOW_SHIFT;
        runs.push(in_order(crossings.send_us.iter().enumerate().map(move |(i, &t)| (t, base | (i as u64) << 1))));
        runs.push(in_order(
            crossings.recv_us.iter().enumerate().filter_map(move |(i, t)| t.map(|t| (t, base | (i as u64) << 1 | 1))),
        ));
    }
    runs.push(in_order(opportunities_us.iter().map(|&t| (t, OPPORTUNITY))));
    // Few runs (two per flow and one): the smallest head is found by looking at each.
    let mut heads: Vec<Option<(u64, u64)>> = runs.iter_mut().map(Iterator::next).collect();
    std::iter::from_fn(move || {
        let (line, r) = heads.iter().enumerate().filter_map(|(r, head)| head.map(|line| (line, r))).min()?;
        heads[r] = runs[r].next();
        Some(line)
    })
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

fn write_direction(path: &FsPath, flows: &[&Crossings], size_bytes: u32, opportunities_us: &[u64]) -> io::Result<()> {
    let located = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path).map_err(located)?);
    let mut line = LineBuffer::default();
    out.write_all(b"# init timestamp: 0.000\n").map_err(located)?;
    for (t_us, place) in lines_in_order(flows, opportunities_us) {
        line.start();
        millis(&mut line, t_us);
        if place == OPPORTUNITY {
            line.text(" # ").int(OPPORTUNITY_BYTES);
        } else {
            let flow = (place >> FLOW_SHIFT) as usize;
            let number = flow as u64 + 1;
            if place & 1 == 0 {
                line.text(" + ").int(size_bytes).text(" ").int(number);
            } else {
                let sent_us = flows[flow].send_us[((place & ((1 << FLOW_SHIFT) - 1)) >> 1) as usize];
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

    #[test]
    fn millis_has_three_decimals() {
        for (t_us, text) in [(0, "0.000"), (5, "0.005"), (1_005, "1.005"), (123_456_789, "123456.789")] {
            let mut line = LineBuffer::default();
            assert_eq!(millis(line.start(), t_us).end(), format!("{text}\n").as_bytes());
        }
    }

    #[test]
    fn a_run_out_of_order_is_sorted() {
        let reordered = Crossings {
            uid: vec![0, 1],
            send_us: vec![10, 11],
            recv_us: vec![Some(40), Some(30)],
            ..Crossings::default()
        };
        let lines: Vec<_> = lines_in_order(&[&reordered], &[]).collect();
        assert_eq!(lines, [(10, 0), (11, 2), (30, 3), (40, 1)]);
    }

    #[test]
    fn ties_keep_the_merges_order() {
        // Flow 1 sends at 10 and 20 µs, the first arrives at 20; flow 0 sends at 20; an opportunity at 20.
        let mut zero = Crossings::default();
        zero.uid.push(0);
        zero.send_us.push(20);
        zero.recv_us.push(None);
        let one =
            Crossings { uid: vec![0, 1], send_us: vec![10, 20], recv_us: vec![Some(20), None], ..Crossings::default() };
        let lines: Vec<_> = lines_in_order(&[&zero, &one], &[20]).collect();
        let one_base = 1 << FLOW_SHIFT;
        assert_eq!(lines, [(10, one_base), (20, 0), (20, one_base | 1), (20, one_base | 2), (20, OPPORTUNITY)]);
    }
}
