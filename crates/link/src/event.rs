//! What a path tells its driver: packets leaving, packets dropped, and (when recording) the link's
//! view — arrivals at the bottleneck queue and every delivery opportunity, used or not — from which
//! capacity and queueing delay are plotted (Mahimahi's `+`, `-`, `#` and `d` log lines).

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropCause {
    /// Random (i.i.d.) loss.
    Loss,
    /// The token-bucket policer found too few tokens.
    Policer,
    /// The queue was full (its limit, in packets or bytes).
    Queue,
    /// The active queue management chose this packet to signal congestion (and could not mark it).
    Aqm,
}

impl DropCause {
    pub fn as_str(self) -> &'static str {
        match self {
            DropCause::Loss => "loss",
            DropCause::Policer => "policer",
            DropCause::Queue => "queue",
            DropCause::Aqm => "aqm",
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Event<P> {
    /// The packet's last byte left the link at `t_us`; it had entered the queue at `queued_at_us`.
    /// `marked`: the queue set its ECN field to CE (the driver writes that into the packet).
    Departure {
        t_us: u64,
        packet: P,
        size_bytes: u32,
        queued_at_us: u64,
        marked: bool,
    },
    Drop {
        t_us: u64,
        packet: P,
        size_bytes: u32,
        cause: DropCause,
    },
    /// A packet reached the bottleneck queue (recorded paths only; also precedes a queue drop).
    LinkArrival {
        t_us: u64,
        size_bytes: u32,
    },
    /// A delivery opportunity of 1500 bytes occurred (recorded paths only).
    Opportunity {
        t_us: u64,
    },
}
