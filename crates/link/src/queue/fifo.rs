//! The storage under every discipline: packets in arrival order and their total size.

use std::collections::VecDeque;

use super::Queued;

#[derive(Debug)]
pub struct Fifo<P> {
    packets: VecDeque<Queued<P>>,
    /// Sum of the sizes of `packets`.
    bytes: u64,
}

impl<P> Default for Fifo<P> {
    fn default() -> Self {
        Fifo { packets: VecDeque::new(), bytes: 0 }
    }
}

impl<P> Fifo<P> {
    pub fn push_back(&mut self, item: Queued<P>) {
        self.bytes += u64::from(item.size_bytes());
        self.packets.push_back(item);
    }

    pub fn pop_front(&mut self) -> Option<Queued<P>> {
        let item = self.packets.pop_front()?;
        self.bytes -= u64::from(item.size_bytes());
        Some(item)
    }

    pub fn front(&self) -> Option<&Queued<P>> {
        self.packets.front()
    }

    pub fn len_packets(&self) -> usize {
        self.packets.len()
    }

    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}
