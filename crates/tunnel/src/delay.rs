//! The client's extra delay (`--extra-delay-ms`): a delay line that holds each data datagram a
//! constant time before it goes on, in each direction, the way `mm-delay` holds packets. It
//! gives one flow a longer propagation delay than the shared path's, outside the path (the
//! flow's base RTT becomes the path's plus twice the extra delay), so flows with different RTTs
//! can share one emulated bottleneck.
//!
//! Sans-IO: times arrive as arguments (µs on CLOCK_MONOTONIC in the relay), the caller sleeps
//! until [`DelayLine::due_in_us`] and then calls [`DelayLine::release`]. A constant delay keeps
//! the order datagrams came in, so the line is the link model's `Delay` (a FIFO of release times)
//! over copies of the datagrams; a due time is never earlier than the one before it, so the order holds even if the caller's clock readings
//! went backwards. Buffers are recycled: once the line has held as many datagrams at once as it
//! ever will, nothing more is allocated.

use pantheon_link::delay::Delay;

/// One datagram in the line: what the caller needs to send it on (its address, TOS, receive
/// time), and its bytes.
type Held<M> = (M, Vec<u8>);

/// The link model's propagation delay (`pantheon_link::delay::Delay`, the FIFO of release times
/// pantheon-emu's paths use) over datagrams the line owns a copy of.
#[derive(Debug)]
pub struct DelayLine<M> {
    delay_us: u64,
    held: Delay<Held<M>>,
    /// The latest arrival held so far, µs: an earlier clock reading is taken as this one, so due
    /// times never decrease.
    latest_us: u64,
    /// Buffers of datagrams already released, for the next ones.
    spare: Vec<Vec<u8>>,
}

impl<M: Copy> DelayLine<M> {
    pub fn new(delay_us: u64) -> DelayLine<M> {
        DelayLine { delay_us, held: Delay::new(delay_us), latest_us: 0, spare: Vec::new() }
    }

    /// How long each datagram is held, in µs.
    pub fn delay_us(&self) -> u64 {
        self.delay_us
    }

    /// Datagrams held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Takes a copy of `datagram`, which arrived at `arrived_us`, to release `delay_us` later.
    pub fn hold(&mut self, arrived_us: u64, datagram: &[u8], meta: M) {
        self.latest_us = self.latest_us.max(arrived_us);
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(datagram);
        self.held.push(self.latest_us, (meta, bytes));
    }

    /// Microseconds from `now_us` until the next datagram is due (0: due now); `None` when the
    /// line is empty.
    pub fn due_in_us(&self, now_us: u64) -> Option<u64> {
        self.held.next_release_us().map(|due_us| due_us.saturating_sub(now_us))
    }

    /// Hands every datagram due by `now_us` to `forward`, in the order they were held, with the
    /// time it was due; stops at the first error, which it returns (that datagram is gone).
    pub fn release<E>(
        &mut self,
        now_us: u64,
        mut forward: impl FnMut(&mut [u8], M, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some((due_us, (meta, mut bytes))) = self.held.pop_due(now_us) {
            let result = forward(&mut bytes, meta, due_us);
            self.spare.push(bytes);
            result?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    fn released(line: &mut DelayLine<u8>, now_us: u64) -> Vec<(Vec<u8>, u8, u64)> {
        let mut out = Vec::new();
        line.release(now_us, |bytes, meta, due_us| {
            out.push((bytes.to_vec(), meta, due_us));
            Ok::<(), Infallible>(())
        })
        .unwrap();
        out
    }

    #[test]
    fn each_datagram_leaves_the_delay_after_it_arrived_in_order() {
        // 25 ms: datagrams arriving at 1000, 1000, 1300 and 9000 µs are due at 26 000, 26 000,
        // 26 300 and 34 000 µs.
        let mut line = DelayLine::new(25_000);
        assert_eq!(line.due_in_us(0), None);
        line.hold(1_000, b"a", 1);
        line.hold(1_000, b"bb", 2);
        line.hold(1_300, b"ccc", 3);
        line.hold(9_000, b"d", 4);
        assert_eq!(line.len(), 4);
        assert_eq!(line.due_in_us(1_000), Some(25_000));
        assert_eq!(released(&mut line, 25_999), []);
        assert_eq!(line.due_in_us(25_999), Some(1));
        assert_eq!(released(&mut line, 26_000), [(b"a".to_vec(), 1, 26_000), (b"bb".to_vec(), 2, 26_000)]);
        assert_eq!(line.due_in_us(26_100), Some(200));
        // Late: everything due by then leaves at once, still in order.
        assert_eq!(released(&mut line, 40_000), [(b"ccc".to_vec(), 3, 26_300), (b"d".to_vec(), 4, 34_000)]);
        assert!(line.is_empty());
        assert_eq!(line.due_in_us(40_000), None);
    }

    #[test]
    fn a_clock_reading_that_goes_back_does_not_reorder() {
        let mut line = DelayLine::new(10);
        line.hold(100, b"first", 1);
        line.hold(50, b"second", 2);
        assert_eq!(released(&mut line, 110), [(b"first".to_vec(), 1, 110), (b"second".to_vec(), 2, 110)]);
    }

    #[test]
    fn released_buffers_are_reused_and_an_error_stops_the_release() {
        let mut line = DelayLine::new(0);
        line.hold(0, &[7; 1500], 0);
        line.hold(0, b"x", 1);
        let result = line.release(0, |_, meta, _| if meta == 0 { Err(meta) } else { Ok(()) });
        assert_eq!(result, Err(0));
        assert_eq!(line.len(), 1);
        line.hold(0, b"y", 2);
        assert_eq!(line.spare.len(), 0, "the released buffer went to the new datagram");
        assert_eq!(released(&mut line, 0), [(b"x".to_vec(), 1, 0), (b"y".to_vec(), 2, 0)]);
        // "y" came in the 1500-byte buffer (none was spare but that one), now spare again.
        assert!(line.spare.iter().any(|b| b.capacity() >= 1500));
    }
}
