//! Which end of the tunnel an endpoint is. The server listens and learns its client from the
//! first authenticated hello; the client connects out (session.rs). The role picks the half of
//! the session key each end sends with (auth.rs), the tunnel addresses (endpoint.rs) and who
//! admits whom (session.rs), so it sits below all three.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Server,
    Client,
}
