//! What the integration tests share: the closed-loop driver over the link model (`link_loop`) and
//! the one percentile definition every test reads a delay figure with (`percentile`; the unit
//! tests in src/ include the same file through src/testing.rs).

pub mod link_loop;
pub mod percentile;
