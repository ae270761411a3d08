//! An ordered set of free blocks keyed by (size, address), as fast as the replay needs.
//!
//! Same order and the same queries as the allocator's `std::set<Block*, BlockComparatorSize>`
//! (lower bound, the next entry, the entries below a key in reverse, all in order), built as a
//! two-level bitmap over size buckets (64 buckets per power of two, as in TLSF allocators), each
//! bucket sorted by (size, address). Finding the lower bound is two bit scans and one search in a
//! bucket; no tree to walk. Most buckets hold one or two blocks: those live inside the bucket
//! itself (one cache line), larger ones spill into a vector that is reused once emptied.

/// (size, address, block)
pub type Entry = (u64, u64, u32);

const SUB: u32 = 6; // 64 buckets per power of two
const LEVELS: usize = 55; // sizes from 512 (2^9) to 2^63
/// Entries a bucket holds in place before it spills.
const INLINE: usize = 2;

/// A position: (bucket, index in the bucket).
pub type Pos = (usize, usize);

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Bucket {
    inline: [Entry; INLINE],
    len: u32,
    /// Index into `FreeSet::spills` while `len > INLINE`.
    spill: u32,
}

const EMPTY: Bucket = Bucket { inline: [(0, 0, 0); INLINE], len: 0, spill: 0 };

#[derive(Debug, Clone)]
pub struct FreeSet {
    l1: u64,
    l2: [u64; LEVELS],
    buckets: Vec<Bucket>,
    spills: Vec<Vec<Entry>>,
    /// Spill vectors not in use (kept for their capacity).
    idle_spills: Vec<u32>,
    len: usize,
}

impl Default for FreeSet {
    fn default() -> Self {
        FreeSet {
            l1: 0,
            l2: [0; LEVELS],
            // allocated by the first insert: a stream's pool that never holds a free block costs
            // nothing
            buckets: Vec::new(),
            spills: Vec::new(),
            idle_spills: Vec::new(),
            len: 0,
        }
    }
}

#[inline]
fn bucket_of(size: u64) -> usize {
    let s = size.max(512);
    let f = 63 - s.leading_zeros();
    let sub = (s >> (f - SUB)) & 63;
    ((f - 9) as usize) * 64 + sub as usize
}

#[inline]
fn key(e: &Entry) -> (u64, u64) {
    (e.0, e.1)
}

impl FreeSet {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn mark(&mut self, b: usize) {
        self.l2[b / 64] |= 1 << (b % 64);
        self.l1 |= 1 << (b / 64);
    }

    #[inline]
    fn unmark(&mut self, b: usize) {
        self.l2[b / 64] &= !(1 << (b % 64));
        if self.l2[b / 64] == 0 {
            self.l1 &= !(1 << (b / 64));
        }
    }

    /// The entries of bucket `b`, in order.
    #[inline]
    fn slice(&self, b: usize) -> &[Entry] {
        let Some(k) = self.buckets.get(b) else {
            return &[];
        };
        let n = k.len as usize;
        if n <= INLINE { &k.inline[..n] } else { &self.spills[k.spill as usize] }
    }

    #[inline]
    pub fn insert(&mut self, size: u64, addr: u64, block: u32) {
        let b = bucket_of(size);
        let e = (size, addr, block);
        self.len += 1;
        if self.buckets.is_empty() {
            self.buckets = vec![EMPTY; LEVELS * 64];
        }
        let k = &mut self.buckets[b];
        let n = k.len as usize;
        if n < INLINE {
            let mut i = n;
            while i > 0 && key(&k.inline[i - 1]) > (size, addr) {
                k.inline[i] = k.inline[i - 1];
                i -= 1;
            }
            k.inline[i] = e;
            k.len += 1;
            if n == 0 {
                self.mark(b);
            }
            return;
        }
        if n == INLINE {
            let idx = match self.idle_spills.pop() {
                Some(i) => i,
                None => {
                    self.spills.push(Vec::new());
                    (self.spills.len() - 1) as u32
                }
            };
            let v = &mut self.spills[idx as usize];
            v.extend_from_slice(&k.inline);
            k.spill = idx;
        }
        k.len += 1;
        let v = &mut self.spills[k.spill as usize];
        let pos = v.partition_point(|x| key(x) < (size, addr));
        v.insert(pos, e);
    }

    #[inline]
    pub fn remove(&mut self, size: u64, addr: u64) -> Option<u32> {
        let b = bucket_of(size);
        let k = self.buckets.get_mut(b)?;
        let n = k.len as usize;
        if n <= INLINE {
            let pos = (0..n).find(|&i| key(&k.inline[i]) == (size, addr))?;
            let e = k.inline[pos];
            for i in pos..n - 1 {
                k.inline[i] = k.inline[i + 1];
            }
            k.len -= 1;
            self.len -= 1;
            if n == 1 {
                self.unmark(b);
            }
            return Some(e.2);
        }
        let v = &mut self.spills[k.spill as usize];
        let pos = v.partition_point(|x| key(x) < (size, addr));
        if pos >= v.len() || key(&v[pos]) != (size, addr) {
            return None;
        }
        let e = v.remove(pos);
        k.len -= 1;
        self.len -= 1;
        if k.len as usize == INLINE {
            k.inline.copy_from_slice(&v[..INLINE]);
            v.clear();
            self.idle_spills.push(k.spill);
        }
        Some(e.2)
    }

    /// The first non-empty bucket at or after `from`.
    #[inline]
    fn next_bucket(&self, from: usize) -> Option<usize> {
        let level = from / 64;
        if level >= LEVELS {
            return None;
        }
        let m = self.l2[level] & (!0u64 << (from % 64));
        if m != 0 {
            return Some(level * 64 + m.trailing_zeros() as usize);
        }
        if level + 1 >= 64 {
            return None;
        }
        let lm = self.l1 & (!0u64 << (level + 1));
        if lm == 0 {
            return None;
        }
        let l = lm.trailing_zeros() as usize;
        Some(l * 64 + self.l2[l].trailing_zeros() as usize)
    }

    /// The last non-empty bucket strictly before `before`.
    #[inline]
    fn prev_bucket(&self, before: usize) -> Option<usize> {
        if before == 0 {
            return None;
        }
        let b = before - 1;
        let level = b / 64;
        let bit = b % 64;
        let m = self.l2[level] & (if bit == 63 { !0u64 } else { (1u64 << (bit + 1)) - 1 });
        if m != 0 {
            return Some(level * 64 + 63 - m.leading_zeros() as usize);
        }
        if level == 0 {
            return None;
        }
        let lm = self.l1 & ((1u64 << level) - 1);
        if lm == 0 {
            return None;
        }
        let l = 63 - lm.leading_zeros() as usize;
        Some(l * 64 + 63 - self.l2[l].leading_zeros() as usize)
    }

    /// `lower_bound((size, 0))`: the first entry not below (size, address 0).
    #[inline]
    pub fn lower_bound(&self, size: u64) -> Option<Pos> {
        let b = bucket_of(size);
        let v = self.slice(b);
        let pos = v.partition_point(|e| e.0 < size);
        if pos < v.len() {
            return Some((b, pos));
        }
        self.next_bucket(b + 1).map(|nb| (nb, 0))
    }

    #[inline]
    pub fn get(&self, p: Pos) -> Entry {
        self.slice(p.0)[p.1]
    }

    #[inline]
    pub fn next(&self, p: Pos) -> Option<Pos> {
        if p.1 + 1 < self.slice(p.0).len() {
            return Some((p.0, p.1 + 1));
        }
        self.next_bucket(p.0 + 1).map(|nb| (nb, 0))
    }

    /// Entries below (size, 0), largest first.
    pub fn below_rev(&self, size: u64) -> Vec<Entry> {
        let mut out = Vec::new();
        let b = bucket_of(size);
        let v = self.slice(b);
        let pos = v.partition_point(|e| e.0 < size);
        out.extend(v[..pos].iter().rev().copied());
        let mut cur = b;
        while let Some(pb) = self.prev_bucket(cur) {
            out.extend(self.slice(pb).iter().rev().copied());
            cur = pb;
        }
        out
    }

    /// Every entry in (size, address) order.
    pub fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        let mut cur = self.next_bucket(0);
        let mut i = 0usize;
        std::iter::from_fn(move || {
            let b = cur?;
            let v = self.slice(b);
            let e = v[i];
            i += 1;
            if i >= v.len() {
                cur = self.next_bucket(b + 1);
                i = 0;
            }
            Some(e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn same_answers_as_an_ordered_set() {
        // random inserts/removes/queries against BTreeSet<(size, addr)>
        let mut s: u64 = 0x1234_5678_9abc_def0;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut fs = FreeSet::default();
        let mut bt: BTreeSet<(u64, u64)> = BTreeSet::new();
        for step in 0..40_000u32 {
            let r = rnd();
            let size = match r % 6 {
                0 => 512 * (1 + rnd() % 64),
                1 => 512 * (1 + rnd() % 4096),
                2 => (1 << 20) * (1 + rnd() % 200),
                // many blocks of one size: buckets that spill and fold back in place
                3 => 2 << 20,
                4 => 512 * (1 + rnd() % 3),
                _ => 512 * (1 + rnd() % (1 << 22)),
            };
            if r % 3 != 0 || bt.is_empty() {
                let addr = (rnd() % (1 << 40)) & !511;
                if bt.insert((size, addr)) {
                    fs.insert(size, addr, step);
                }
            } else {
                let k = *bt.iter().nth((rnd() % bt.len() as u64) as usize).unwrap();
                bt.remove(&k);
                assert!(fs.remove(k.0, k.1).is_some());
            }
            let q = 512 * (1 + rnd() % (1 << 20));
            let want = bt.range((q, 0)..).next().copied();
            let got = fs.lower_bound(q).map(|p| {
                let e = fs.get(p);
                (e.0, e.1)
            });
            assert_eq!(got, want);
            if let Some(p) = fs.lower_bound(q) {
                let want2 = bt.range((q, 0)..).nth(1).copied();
                assert_eq!(fs.next(p).map(|p| (fs.get(p).0, fs.get(p).1)), want2);
            }
            if step % 500 == 0 {
                let all: Vec<(u64, u64)> = fs.iter().map(|e| (e.0, e.1)).collect();
                assert_eq!(all, bt.iter().copied().collect::<Vec<_>>());
                let below: Vec<(u64, u64)> = fs.below_rev(q).iter().map(|e| (e.0, e.1)).collect();
                assert_eq!(below, bt.range(..(q, 0)).rev().copied().collect::<Vec<_>>());
            }
        }
        assert_eq!(fs.len(), bt.len());
    }
}
