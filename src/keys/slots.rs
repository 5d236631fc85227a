//! Redis Cluster hash slots and the hash tags resq gives its keys to put them in a chosen slot.
//!
//! Redis Cluster puts a key in slot CRC16(hashed) mod 16384, where `hashed` is the key's hash
//! tag (the text between its first `{` and the next `}`, when not empty) or else the whole key.
//! A Resque queue's list, `<ns>:queue:<q>`, is named by its producers (Ruby, Jesque,
//! node-resque); on a namespace without a tag it lands in whatever slot its name hashes to. resq
//! puts the keys that move with a job taken from that queue (the worker record, the worker's
//! stats) in the same slot by giving them a hash tag chosen for it: [`slot_tag`].
//!
//! The tag of a slot is the first string, by length and then in the order `0`–`9`, `a`–`z`,
//! whose CRC16 (XMODEM) mod 16384 is the slot. Every slot has one of at most four characters;
//! any client can rebuild the table from this rule.

use std::sync::OnceLock;

/// Hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// The slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key without one.
pub(crate) fn hash_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let len = rest.iter().position(|b| *b == b'}')?;
            (len > 0).then(|| &rest[..len])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(hashed) % SLOTS
}

const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// The tag of every slot, built once (about 1.7 million CRC16s of four bytes at most).
fn table() -> &'static [[u8; 4]] {
    static TABLE: OnceLock<Vec<[u8; 4]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut tags = vec![[0u8; 4]; SLOTS as usize];
        let mut found = 0usize;
        'lengths: for len in 1..=4usize {
            let mut digits = [0usize; 4];
            loop {
                let mut tag = [0u8; 4];
                for (i, d) in digits[..len].iter().enumerate() {
                    tag[i] = ALPHABET[*d];
                }
                let s = usize::from(crc16::State::<crc16::XMODEM>::calculate(&tag[..len]) % SLOTS);
                if tags[s][0] == 0 {
                    tags[s] = tag;
                    found += 1;
                    if found == SLOTS as usize {
                        break 'lengths;
                    }
                }
                // The next string of this length, last character fastest.
                let mut i = len;
                loop {
                    if i == 0 {
                        continue 'lengths;
                    }
                    i -= 1;
                    digits[i] += 1;
                    if digits[i] < ALPHABET.len() {
                        break;
                    }
                    digits[i] = 0;
                }
            }
        }
        tags
    })
}

/// The hash tag (without braces) that puts a key in `slot` (taken mod 16384).
pub(crate) fn slot_tag(slot: u16) -> &'static str {
    let tag = &table()[usize::from(slot % SLOTS)];
    let len = tag.iter().position(|b| *b == 0).unwrap_or(4);
    // (Built from ALPHABET: always ASCII.)
    std::str::from_utf8(&tag[..len]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    #[allow(unused_imports)] // (benches include this file, and drop its tests)
    use super::*;

    #[test]
    fn slots_follow_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(hash_slot(b"foo"), 12182);
        assert_eq!(
            hash_slot(b"{user1000}.following"),
            hash_slot(b"{user1000}.followers")
        );
        assert_eq!(hash_slot(b"{resque}:queue:default"), hash_slot(b"resque"));
        assert_eq!(
            hash_slot(b"foo{}{bar}"),
            crc16::State::<crc16::XMODEM>::calculate(b"foo{}{bar}") % SLOTS
        );
    }

    #[test]
    fn every_slot_has_a_short_tag_that_lands_in_it() {
        for s in 0..SLOTS {
            let t = slot_tag(s);
            assert!(!t.is_empty() && t.len() <= 4, "{s}: {t:?}");
            assert!(t.bytes().all(|b| ALPHABET.contains(&b)));
            assert_eq!(hash_slot(format!("x{{{t}}}y").as_bytes()), s);
        }
        // The rule's first entries: the one-character strings take the slots they hash to.
        assert_eq!(slot_tag(hash_slot(b"0")), "0");
        assert_eq!(slot_tag(hash_slot(b"z")), "z");
    }
}
