//! Anti-replay: each endpoint accepts each number (a data UID, a control counter) of its peer's
//! at most once, as IPsec's receiver does (RFC 4303 §3.4.3): a sliding window remembers which of
//! the last `WINDOW` numbers below the highest one accepted have been seen; anything older is
//! refused. The window is a ring of 64-bit words, cleared a word at a time as it slides (RFC 6479
//! §2), so sliding costs nothing per datagram at any rate. As RFC 4303 requires, a number is
//! checked against the window before its datagram's tag is, and marked only once the tag is right,
//! so forged datagrams cannot move the window.
//!
//! Data datagrams carry only their UID's low 31 bits; `infer` restores the rest, taking the UID
//! nearest the highest one accepted (RFC 4303 Appendix A, with a window far smaller than 2^31).

use pantheon_format::tunnel_wire::UID_WIRE_MASK;

/// 64-bit words in the ring.
const WORDS: usize = 64;
const BITS: u64 = (WORDS * 64) as u64;
/// How far below the highest number accepted a number may be: one word is kept spare so that a
/// slide clears whole words (RFC 6479 §2). 4032 datagrams are 47 ms at 1 Gbit/s.
pub const WINDOW: u64 = BITS - 64;

/// Why a number was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// Already accepted.
    Duplicate,
    /// Below the window.
    TooOld,
}

#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// The highest number accepted (0 before any).
    top: u64,
    /// Bit n mod `BITS` is set when n, within the window, was accepted.
    seen: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> ReplayWindow {
        ReplayWindow { top: 0, seen: [0; WORDS] }
    }
}

impl ReplayWindow {
    /// Whether `n` may be accepted; changes nothing.
    pub fn check(&self, n: u64) -> Result<(), Replayed> {
        if n > self.top {
            return Ok(());
        }
        if self.top - n >= WINDOW {
            return Err(Replayed::TooOld);
        }
        let (word, bit) = Self::position(n);
        if self.seen[word] & bit != 0 {
            Err(Replayed::Duplicate)
        } else {
            Ok(())
        }
    }

    /// Marks `n` (which passed `check`, and whose datagram is authentic) as accepted.
    pub fn accept(&mut self, n: u64) {
        if n > self.top {
            let top_word = self.top / 64;
            let new_word = n / 64;
            for word in (top_word + 1..=new_word).take(WORDS) {
                self.seen[(word % WORDS as u64) as usize] = 0;
            }
            self.top = n;
        }
        let (word, bit) = Self::position(n);
        self.seen[word] |= bit;
    }

    fn position(n: u64) -> (usize, u64) {
        (((n % BITS) / 64) as usize, 1 << (n % 64))
    }

    /// The full UID whose low 31 bits are `low`: the candidate nearest the highest accepted.
    pub fn infer(&self, low: u64) -> u64 {
        let span = UID_WIRE_MASK + 1;
        let base = (self.top & !UID_WIRE_MASK) | low;
        [base.checked_sub(span), Some(base), base.checked_add(span)]
            .into_iter()
            .flatten()
            .min_by_key(|candidate| candidate.abs_diff(self.top))
            .expect("base is a candidate")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(window: &mut ReplayWindow, n: u64) -> Result<(), Replayed> {
        window.check(n)?;
        window.accept(n);
        Ok(())
    }

    #[test]
    fn each_number_is_accepted_once_in_any_order_within_the_window() {
        let mut window = ReplayWindow::default();
        assert_eq!(accept(&mut window, 0), Ok(()));
        assert_eq!(accept(&mut window, 0), Err(Replayed::Duplicate));
        assert_eq!(accept(&mut window, 5), Ok(()));
        assert_eq!(accept(&mut window, 3), Ok(()));
        assert_eq!(accept(&mut window, 3), Err(Replayed::Duplicate));
        assert_eq!(accept(&mut window, 5), Err(Replayed::Duplicate));
        assert_eq!(accept(&mut window, 5 + WINDOW), Ok(()));
        assert_eq!(accept(&mut window, 5), Err(Replayed::TooOld));
        assert_eq!(accept(&mut window, 6), Ok(()), "just inside the window");
    }

    #[test]
    fn checking_does_not_mark() {
        let mut window = ReplayWindow::default();
        assert_eq!(window.check(9), Ok(()));
        assert_eq!(window.check(9), Ok(()));
        window.accept(9);
        assert_eq!(window.check(9), Err(Replayed::Duplicate));
    }

    #[test]
    fn a_long_jump_forgets_the_old_window() {
        let mut window = ReplayWindow::default();
        for n in 0..100 {
            window.accept(n);
        }
        let far = 100 + 10 * BITS + 7;
        assert_eq!(accept(&mut window, far), Ok(()));
        // The ring position of 97, accepted before the jump: this number never was.
        assert_eq!((far - 10) % BITS, 97);
        assert_eq!(accept(&mut window, far - 10), Ok(()));
        assert_eq!(accept(&mut window, far - 10), Err(Replayed::Duplicate));
    }

    #[test]
    fn the_uids_high_bits_follow_the_window_across_a_wrap() {
        let mut window = ReplayWindow::default();
        assert_eq!(window.infer(3), 3);
        window.accept(UID_WIRE_MASK - 1);
        assert_eq!(window.infer(UID_WIRE_MASK - 5), UID_WIRE_MASK - 5);
        assert_eq!(window.infer(2), UID_WIRE_MASK + 3, "past the wrap");
        window.accept(UID_WIRE_MASK + 10);
        assert_eq!(window.infer(UID_WIRE_MASK - 5), UID_WIRE_MASK - 5, "late, from before the wrap");
        assert_eq!(window.infer(11), UID_WIRE_MASK + 12);
    }
}
