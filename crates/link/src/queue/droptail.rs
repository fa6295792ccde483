//! DropTail: a FIFO that is either unbounded or limited in packets or in bytes (Mahimahi's
//! `--uplink-queue=droptail --uplink-queue-args=packets=N|bytes=N`, and `infinite`). A packet
//! that would take the queue past its limit is dropped on arrival; nothing already queued is ever
//! pushed out, and nothing is marked.

use super::fifo::Fifo;
use super::{Discipline, Dropper, QueueLimit, Queued};
use crate::event::DropCause;

#[derive(Debug)]
pub struct DropTail<P> {
    limit: QueueLimit,
    fifo: Fifo<P>,
}

impl<P> DropTail<P> {
    pub fn new(limit: QueueLimit) -> Self {
        DropTail { limit, fifo: Fifo::default() }
    }
}

impl<P: Send + std::fmt::Debug> Discipline<P> for DropTail<P> {
    fn enqueue(&mut self, _t_us: u64, item: Queued<P>, drop: &mut Dropper<'_, P>) {
        if self.limit.admits(self.fifo.len_packets(), self.fifo.len_bytes(), item.size_bytes()) {
            self.fifo.push_back(item);
        } else {
            drop(item, DropCause::Queue);
        }
    }

    fn dequeue(&mut self, _t_us: u64, _drop: &mut Dropper<'_, P>) -> Option<Queued<P>> {
        self.fifo.pop_front()
    }

    fn len_packets(&self) -> usize {
        self.fifo.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.fifo.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::Ecn;
    use crate::queue::testing::{dequeue, enqueue, packet};

    fn fill(q: &mut DropTail<u32>, sizes: &[u32]) -> Vec<u32> {
        let mut dropped = Vec::new();
        for (id, &size) in sizes.iter().enumerate() {
            enqueue(q, packet(id as u32, size, 0, Ecn::Ect0, 0), &mut dropped);
        }
        dropped
            .into_iter()
            .map(|(id, cause)| {
                assert_eq!(cause, DropCause::Queue);
                id
            })
            .collect()
    }

    #[test]
    fn packet_limit_drops_exactly_at_the_limit() {
        let mut q = DropTail::new(QueueLimit::Packets(2));
        assert_eq!(fill(&mut q, &[1500, 1500, 40]), vec![2]);
        dequeue(&mut q, 0, &mut Vec::new());
        assert!(fill(&mut q, &[40]).is_empty());
        assert_eq!(q.len_packets(), 2);
    }

    #[test]
    fn byte_limit_counts_bytes_not_packets() {
        let mut q = DropTail::new(QueueLimit::Bytes(3000));
        // 3001 bytes would exceed 3000; exactly 3000 fits. Nothing is marked, ECT or not.
        assert_eq!(fill(&mut q, &[1500, 1460, 41, 40]), vec![2]);
        assert_eq!(q.len_bytes(), 3000);
        assert!(!dequeue(&mut q, 0, &mut Vec::new()).unwrap().marked);
    }

    #[test]
    fn infinite_never_drops() {
        let mut q = DropTail::new(QueueLimit::Infinite);
        assert!(fill(&mut q, &[1500; 100_000]).is_empty());
    }
}
