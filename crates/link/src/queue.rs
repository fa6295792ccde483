//! The bottleneck buffer: a FIFO that is either unbounded or DropTail-limited in packets or in
//! bytes (Mahimahi's `--uplink-queue=droptail --uplink-queue-args=packets=N|bytes=N`). A packet
//! that would take the queue past its limit is dropped on arrival; nothing already queued is
//! ever pushed out. The packet currently being serialised onto the link is not in the queue.

use std::collections::VecDeque;

/// How much the queue may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    Infinite,
    /// DropTail: at most this many packets waiting.
    Packets(u64),
    /// DropTail: at most this many bytes waiting (IP datagram bytes).
    Bytes(u64),
}

/// A packet waiting in the queue.
#[derive(Debug)]
pub struct Queued<P> {
    pub packet: P,
    pub size_bytes: u32,
    /// When it entered the queue (after propagation delay, loss and policing).
    pub arrival_us: u64,
}

#[derive(Debug)]
pub struct Queue<P> {
    limit: QueueLimit,
    packets: VecDeque<Queued<P>>,
    /// Sum of `size_bytes` over `packets`.
    bytes: u64,
}

impl<P> Queue<P> {
    pub fn new(limit: QueueLimit) -> Self {
        Queue { limit, packets: VecDeque::new(), bytes: 0 }
    }

    /// Appends the packet, or hands it back if DropTail must drop it.
    pub fn enqueue(&mut self, item: Queued<P>) -> Result<(), Queued<P>> {
        let fits = match self.limit {
            QueueLimit::Infinite => true,
            QueueLimit::Packets(n) => (self.packets.len() as u64) < n,
            QueueLimit::Bytes(n) => self.bytes + u64::from(item.size_bytes) <= n,
        };
        if !fits {
            return Err(item);
        }
        self.bytes += u64::from(item.size_bytes);
        self.packets.push_back(item);
        Ok(())
    }

    pub fn dequeue(&mut self) -> Option<Queued<P>> {
        let item = self.packets.pop_front()?;
        self.bytes -= u64::from(item.size_bytes);
        Some(item)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn item(size_bytes: u32) -> Queued<()> {
        Queued { packet: (), size_bytes, arrival_us: 0 }
    }

    #[test]
    fn packet_limit_drops_exactly_at_the_limit() {
        let mut q = Queue::new(QueueLimit::Packets(2));
        assert!(q.enqueue(item(1500)).is_ok());
        assert!(q.enqueue(item(1500)).is_ok());
        assert!(q.enqueue(item(40)).is_err());
        q.dequeue();
        assert!(q.enqueue(item(40)).is_ok());
        assert_eq!(q.len_packets(), 2);
    }

    #[test]
    fn byte_limit_counts_bytes_not_packets() {
        let mut q = Queue::new(QueueLimit::Bytes(3000));
        assert!(q.enqueue(item(1500)).is_ok());
        assert!(q.enqueue(item(1460)).is_ok());
        assert!(q.enqueue(item(41)).is_err(), "3001 bytes would exceed 3000");
        assert!(q.enqueue(item(40)).is_ok(), "exactly 3000 bytes fits");
        assert_eq!(q.len_bytes(), 3000);
    }

    #[test]
    fn infinite_never_drops() {
        let mut q = Queue::new(QueueLimit::Infinite);
        for _ in 0..100_000 {
            assert!(q.enqueue(item(1500)).is_ok());
        }
    }
}
