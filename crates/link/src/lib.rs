//! Pantheon's link model, sans-IO: the emulator (`pantheon-emu`, real time) and the simulator
//! (virtual time) drive the same code, so their links cannot disagree by construction.
//!
//! Times are microseconds on the driver's clock (`t_us`), sizes are IP datagram bytes; rates are
//! configuration, in Mbit/s as the command line gives them (`rate_mbps`, docs/architecture.md's
//! rule), turned into opportunity times once, when a schedule or the policer is built. Nothing
//! here reads a clock, touches a socket or allocates per packet beyond queue growth.

pub mod bounds;
pub mod config;
pub mod delay;
pub mod ecn;
pub mod event;
pub mod link;
pub mod loss;
pub mod path;
pub mod policer;
pub mod queue;
pub mod rng;
pub mod schedule;
pub mod stalls;
pub mod timing;
pub mod trace;

pub use config::{Delivery, PathConfig, PolicerConfig};
pub use ecn::Ecn;
pub use event::{DropCause, Event};
pub use path::Path;
pub use queue::{Aqm, PacketInfo, QueueLimit};
pub use schedule::OPPORTUNITY_BYTES;
pub use timing::Timing;
pub use trace::{Trace, TraceError};
