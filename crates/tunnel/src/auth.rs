//! Datagram authentication: only the peer holding this session's key can put a datagram into the
//! command's namespace, or make a server adopt a new client address.
//!
//! The session key is 32 random bytes that both endpoints read from a file only their owner can
//! read (`--key-file`; the harness writes one per run, or hands it over ssh). Each direction has a
//! key of its own, one half of the session key: the first 16 bytes key what the client sends, the
//! last 16 what the server sends, so a datagram reflected back to its sender fails the check.
//!
//! The tag is SipHash-1-3: SipHash (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
//! INDOCRYPT 2012) is a pseudorandom function keyed with 128 bits, meant for MACs of short
//! messages; SipHash-c-d does c compression rounds per 8-byte word and d finalisation rounds. The
//! paper's default is 2-4; 1-3 is the variant Rust's standard library keys its hash maps with
//! against flooding, and costs half as much per byte: 0.4 µs per 1464-byte datagram here against
//! 0.72 µs for 2-4, which at 1 Gbit/s (85 000 datagrams a second each way) is 3 % of a core per
//! endpoint rather than 6 % (docs/tunnel.md, Speed). With a 32-bit tag the forger's chance is the
//! tag's 2^-32 per datagram either way; every datagram that fails is counted and reported. Its
//! input is the datagram's 64-bit UID or counter (big-endian), its first 4 bytes and everything
//! after the tag (`pantheon_format::tunnel_wire`); the tag is the output's first 4 bytes
//! (little-endian order, the paper's).

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use pantheon_format::tunnel_wire::{control, Control, TAG_RANGE};
use siphasher::sip::SipHasher13;

use crate::role::Role;

/// Bytes of the session key.
pub const KEY_BYTES: usize = 32;

/// One direction's key.
#[derive(Clone, Copy)]
pub struct DirectionKey([u8; 16]);

impl std::fmt::Debug for DirectionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DirectionKey(..)")
    }
}

/// (the key of what `role` sends, the key of what it receives).
pub fn direction_keys(session: &[u8; KEY_BYTES], role: Role) -> (DirectionKey, DirectionKey) {
    let (first, last) = session.split_at(16);
    let client = DirectionKey(first.try_into().expect("16 bytes"));
    let server = DirectionKey(last.try_into().expect("16 bytes"));
    match role {
        Role::Client => (client, server),
        Role::Server => (server, client),
    }
}

impl DirectionKey {
    /// The tag of `datagram` (tag field included, and skipped) numbered `sequence`.
    pub fn tag(&self, sequence: u64, datagram: &[u8]) -> [u8; 4] {
        use std::hash::Hasher;
        let mut mac = SipHasher13::new_with_key(&self.0);
        mac.write(&sequence.to_be_bytes());
        mac.write(&datagram[..TAG_RANGE.start]);
        mac.write(&datagram[TAG_RANGE.end..]);
        mac.finish().to_le_bytes()[..4].try_into().expect("4 bytes")
    }

    /// Writes the tag into `datagram`.
    pub fn seal(&self, sequence: u64, datagram: &mut [u8]) {
        let tag = self.tag(sequence, datagram);
        datagram[TAG_RANGE].copy_from_slice(&tag);
    }

    /// Whether `datagram`'s tag is right for `sequence`, in constant time.
    pub fn verify(&self, sequence: u64, datagram: &[u8]) -> bool {
        let expected = self.tag(sequence, datagram);
        expected.iter().zip(&datagram[TAG_RANGE]).fold(0, |diff, (a, b)| diff | (a ^ b)) == 0
    }
}

/// What an endpoint sends its control messages with: its key and their counter, shared by the
/// threads that send them.
#[derive(Debug)]
pub struct ControlSender {
    key: DirectionKey,
    /// The next control message's number.
    counter: AtomicU64,
}

impl ControlSender {
    pub fn new(key: DirectionKey) -> ControlSender {
        ControlSender { key, counter: AtomicU64::new(0) }
    }

    /// A sealed control message with a fresh number.
    pub fn message(&self, kind: Control, fields: &[u64]) -> Vec<u8> {
        let counter = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut datagram = control(kind, counter, fields);
        self.key.seal(counter, &mut datagram);
        datagram
    }
}

/// The session key in `path`: 64 hexadecimal digits and at most a newline, in a regular file that
/// grants nothing to group or others.
pub fn read_key_file(path: &Path) -> Result<[u8; KEY_BYTES], String> {
    let name = path.display();
    // Non-blocking: a FIFO in its place is refused below instead of waiting for a writer.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("--key-file {name}: cannot open it: {e}"))?;
    let metadata = file.metadata().map_err(|e| format!("--key-file {name}: {e}"))?;
    if !metadata.is_file() {
        return Err(format!("--key-file {name}: not a regular file"));
    }
    let mode = metadata.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(format!("--key-file {name}: mode {:03o} lets others read it; make it 0600", mode & 0o777));
    }
    let mut text = String::new();
    file.take(2 * KEY_BYTES as u64 + 2)
        .read_to_string(&mut text)
        .map_err(|e| format!("--key-file {name}: cannot read it: {e}"))?;
    parse_key(text.strip_suffix('\n').unwrap_or(&text)).ok_or_else(|| {
        format!("--key-file {name}: expected {} hexadecimal digits (a {KEY_BYTES}-byte key)", 2 * KEY_BYTES)
    })
}

fn parse_key(hex: &str) -> Option<[u8; KEY_BYTES]> {
    if hex.len() != 2 * KEY_BYTES || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut key = [0; KEY_BYTES];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hasher;

    #[test]
    fn siphash_1_3_matches_an_independent_implementation() {
        // The paper's Appendix A input (key 00..0f, message 00..0e); the value is what
        // tests/tunnel_attacker.py's SipHash-c-d computes, which gives the paper's 2-4 vector.
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let message: Vec<u8> = (0..15).collect();
        let mut mac = SipHasher13::new_with_key(&key);
        mac.write(&message);
        assert_eq!(mac.finish(), 0xd320_d86d_2a51_9956);
    }

    #[test]
    fn a_tag_depends_on_the_key_the_sequence_and_every_byte_but_its_own() {
        let session: [u8; KEY_BYTES] = std::array::from_fn(|i| i as u8);
        let (client_sends, _) = direction_keys(&session, Role::Client);
        let (server_sends, server_receives) = direction_keys(&session, Role::Server);
        let mut datagram = vec![0, 0, 0, 5, 0, 0, 0, 0, 0x45, 1, 2, 3];
        client_sends.seal(5, &mut datagram);
        assert!(server_receives.verify(5, &datagram));
        assert!(!server_receives.verify(5 + (1 << 31), &datagram), "the UID's high bits count");
        assert!(!server_sends.verify(5, &datagram), "a reflected datagram fails");
        for i in (0..4).chain(8..datagram.len()) {
            let mut altered = datagram.clone();
            altered[i] ^= 1;
            assert!(!server_receives.verify(5, &altered), "byte {i}");
        }
    }

    #[test]
    fn control_messages_are_numbered_from_zero() {
        let session = [7; KEY_BYTES];
        let (sends, _) = direction_keys(&session, Role::Server);
        let (_, receives) = direction_keys(&session, Role::Client);
        let sender = ControlSender::new(sends);
        let first = sender.message(Control::Welcome, &[]);
        let second = sender.message(Control::Probe, &[42]);
        assert!(receives.verify(0, &first) && receives.verify(1, &second));
        assert!(!receives.verify(1, &first));
    }

    #[test]
    fn keys_are_64_hex_digits() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        assert_eq!(parse_key(hex).unwrap()[..3], [0, 0x11, 0x22]);
        assert_eq!(parse_key(&hex[1..]), None);
        assert_eq!(parse_key(&format!("{}g", &hex[1..])), None);
    }
}
