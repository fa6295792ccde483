//! A run's transfers, written as `transfers.parquet`: the file the harness's record merge writes
//! for an emulated run from the transfer logs (python/pantheon/harness/records.py,
//! `TRANSFERS_SCHEMA`), so that the analysis reads a simulated run's flow completion times as it
//! reads an emulated one's.
//!
//! One row per planned transfer, flows in order and transfers in plan order; columns `flow`
//! (uint16, the records' flow number, from 0), `transfer` (uint32, its index within its flow),
//! `bytes` (uint64), `start_us` (int64, planned), `began_us` (int64, when its sender began it:
//! here its start, as the simulator's senders start on time), `end_us` (int64, when its receiver
//! had the budget's last distinct datagram; null if not by the run's end). µs since the run's
//! start; every column nullable, as pyarrow writes them. The file is written by records.rs's
//! writer (`write_parquet_file`), with the same settings for integers.
//!
//! A transfer's flow completion time is `end_us − began_us`: no handshake, as pantheon-udp has
//! none (the kernel TCP sender pays one round trip more in an emulated run).

use std::io;
use std::path::Path as FsPath;

use parquet::data_type::{Int32Type, Int64Type};

use crate::observer::Observer;
use crate::records::{integer_properties, write_parquet_file};
use crate::scenario::Scenario;

/// transfers.py's schema in Parquet's terms: the logical types are those pyarrow maps back to
/// uint16, uint32, uint64 and int64.
const SCHEMA: &str = "message schema {
    optional int32 flow (INTEGER(16, false));
    optional int32 transfer (INTEGER(32, false));
    optional int64 bytes (INTEGER(64, false));
    optional int64 start_us;
    optional int64 began_us;
    optional int64 end_us;
}";

/// One transfer's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub flow: u16,
    /// Its index within its flow.
    pub transfer: u32,
    pub bytes: u64,
    pub start_us: u64,
    pub began_us: Option<u64>,
    pub end_us: Option<u64>,
}

/// The observer that notes when each transfer completes.
#[derive(Debug)]
pub struct Transfers {
    /// One per sender with a transfer, in the scenario's order.
    pub rows: Vec<Transfer>,
    /// Per sender of the scenario, its row (`None`: a bulk flow's sender).
    row_of_sender: Vec<Option<usize>>,
}

impl Transfers {
    /// The transfers of `scenario`, none complete yet; `None` when it has none (and so no file).
    pub fn new(scenario: &Scenario) -> Option<Transfers> {
        if !scenario.has_transfers() {
            return None;
        }
        let mut rows = Vec::new();
        let mut row_of_sender = Vec::with_capacity(scenario.flows.len());
        let mut index_in_flow = 0;
        let mut last_flow = None;
        for plan in &scenario.flows {
            if last_flow != Some(plan.flow) {
                index_in_flow = 0;
                last_flow = Some(plan.flow);
            }
            row_of_sender.push(plan.bytes.map(|bytes| {
                rows.push(Transfer {
                    flow: plan.flow as u16,
                    transfer: index_in_flow,
                    bytes,
                    start_us: plan.start_us,
                    began_us: Some(plan.start_us),
                    end_us: None,
                });
                index_in_flow += 1;
                rows.len() - 1
            }));
        }
        Some(Transfers { rows, row_of_sender })
    }

    /// Writes `transfers.parquet` into `dir`.
    pub fn write_parquet(&self, dir: &FsPath) -> io::Result<()> {
        let rows = &self.rows;
        let present = vec![1i16; rows.len()];
        let int64 = |value: fn(&Transfer) -> u64| rows.iter().map(|r| value(r) as i64).collect::<Vec<i64>>();
        // A nullable column: the values present and every row's definition level.
        let nullable = |value: fn(&Transfer) -> Option<u64>| {
            let values: Vec<i64> = rows.iter().filter_map(value).map(|v| v as i64).collect();
            let levels: Vec<i16> = rows.iter().map(|r| i16::from(value(r).is_some())).collect();
            (values, levels)
        };
        write_parquet_file(&dir.join("transfers.parquet"), SCHEMA, integer_properties().build(), |column, writer| {
            match column {
                0 => {
                    let flow: Vec<i32> = rows.iter().map(|r| i32::from(r.flow)).collect();
                    writer.typed::<Int32Type>().write_batch(&flow, Some(&present), None)
                }
                // Parquet stores unsigned integers in the signed physical type of their width, bit
                // for bit.
                1 => {
                    let transfer: Vec<i32> = rows.iter().map(|r| r.transfer as i32).collect();
                    writer.typed::<Int32Type>().write_batch(&transfer, Some(&present), None)
                }
                2 => writer.typed::<Int64Type>().write_batch(&int64(|r| r.bytes), Some(&present), None),
                3 => writer.typed::<Int64Type>().write_batch(&int64(|r| r.start_us), Some(&present), None),
                _ => {
                    let (values, levels) = nullable(if column == 4 { |r| r.began_us } else { |r| r.end_us });
                    writer.typed::<Int64Type>().write_batch(&values, Some(&levels), None)
                }
            }
            .map(drop)
        })
    }
}

impl Observer for Transfers {
    fn transfer_complete(&mut self, sender: usize, t_us: u64) {
        if let Some(row) = self.row_of_sender[sender] {
            self.rows[row].end_us = Some(t_us);
        }
    }
}
