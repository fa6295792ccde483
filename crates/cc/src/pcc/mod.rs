//! The PCC family (Performance-oriented Congestion Control): senders that run experiments instead
//! of reacting to packet-level events. Each tries a rate for a monitor interval, scores what it
//! earned with a utility function, and moves toward the rate that scored best.
//!
//! - [`monitor`]: the monitor intervals and the one decision (rate, safety window, wake-up) both
//!   controllers share (Dong et al., NSDI 2015, §2.1 and §3; reused unchanged by Vivace, §2);
//! - [`allegro`]: PCC Allegro (NSDI 2015): a loss-based utility, rate changes by fixed steps;
//! - [`vivace`]: PCC Vivace (NSDI 2018): a latency-aware utility, rate changes by online
//!   gradient ascent.

pub mod allegro;
pub mod monitor;
pub mod vivace;
