//! The Internet checksum (RFC 1071): the 16-bit one's-complement sum of 16-bit big-endian words,
//! as IPv4, TCP and UDP headers carry it. Sums are accumulated in 64 bits, 32 bits at a time, and
//! folded at the end; the one's-complement sum does not depend on the order of the words, so wider
//! additions give the same result (RFC 1071 §2(B), "parallel summation").

/// Adds `bytes` (an odd length counts as padded with a zero byte) to a running sum.
pub fn add(mut sum: u64, bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(4);
    for word in &mut chunks {
        sum += u64::from(u32::from_be_bytes([word[0], word[1], word[2], word[3]]));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    sum + u64::from(u32::from_be_bytes(tail))
}

/// Folds a running sum to 16 bits (not complemented).
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum of `bytes`: the complement of their folded sum.
pub fn checksum(bytes: &[u8]) -> u16 {
    !fold(add(0, bytes))
}

/// The sum of an IPv4 pseudo-header (RFC 793 §3.1, RFC 768) for a transport segment of
/// `length_bytes`: source, destination, protocol, length.
pub fn pseudo_header(source: [u8; 4], destination: [u8; 4], protocol: u8, length_bytes: usize) -> u64 {
    add(add(0, &source), &destination) + u64::from(protocol) + length_bytes as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (one's complement).
        assert_eq!(fold(add(0, &[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])), 0xddf2);
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
    }

    #[test]
    fn odd_lengths_are_padded_with_a_zero_byte() {
        assert_eq!(fold(add(0, &[0xab])), 0xab00);
        assert_eq!(fold(add(0, &[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
    }

    #[test]
    fn an_ipv4_header_with_its_checksum_sums_to_all_ones() {
        // A real header (Wikipedia's IPv4 checksum example): checksum b861.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(checksum(&header), 0);
        let mut zeroed = header;
        zeroed[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(checksum(&zeroed), 0xb861);
    }
}
