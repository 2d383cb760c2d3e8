//! RFC 6962 / RFC 9162 Merkle tree hashing for the audit ledger.
//!
//! This module owns the tree arithmetic only: leaf and node hashing, the tree
//! head over a list of leaf hashes, a streaming root builder, and the
//! generation and verification of inclusion and consistency proofs. It does no
//! IO and knows nothing about ledger records; the audit ledger hashes its
//! entries into leaves here, and `checkpoint` signs the roots computed here.

use sha2::{Digest, Sha256};

/// A SHA-256 digest: a leaf hash, an interior node hash or a tree root.
pub type Hash = [u8; 32];

/// Hashes one log entry into a leaf: SHA-256(0x00 || entry).
pub fn leaf_hash(entry: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0x00]);
    hasher.update(entry);
    hasher.finalize().into()
}

/// Hashes two children into their parent: SHA-256(0x01 || left || right).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([0x01]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// Returns the root of the empty tree, which is SHA-256 of the empty string.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// Returns the largest power of two strictly smaller than `n`, for `n >= 2`.
fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2, "a split needs at least two leaves");
    1 << (n - 1).ilog2()
}

/// Computes the Merkle tree head (MTH) over already hashed leaves.
pub fn root(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => empty_root(),
        1 => leaves[0],
        n => {
            let k = split_point(n);
            node_hash(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

/// Streaming root computation in O(log n) memory.
///
/// The builder keeps the roots of the perfect subtrees that make up the tree
/// so far, one per set bit of the size, from the largest (leftmost) to the
/// smallest (rightmost).
#[derive(Debug, Clone, Default)]
pub struct RootBuilder {
    size: u64,
    stack: Vec<Hash>,
}

impl RootBuilder {
    /// Creates a builder for the empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one leaf hash, merging perfect subtrees of equal height.
    pub fn push(&mut self, leaf: Hash) {
        let mut hash = leaf;
        let mut size = self.size;
        while size & 1 == 1 {
            let left = self
                .stack
                .pop()
                .expect("every set bit of the size has a subtree on the stack");
            hash = node_hash(&left, &hash);
            size >>= 1;
        }
        self.stack.push(hash);
        self.size += 1;
    }

    /// Returns the number of leaves pushed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Returns the tree head at the current size.
    pub fn root(&self) -> Hash {
        // Subtrees are merged from the right, as MTH splits off the largest
        // perfect subtree on the left at every level.
        self.stack
            .iter()
            .rev()
            .copied()
            .reduce(|acc, left| node_hash(&left, &acc))
            .unwrap_or_else(empty_root)
    }
}

/// Returns the audit path of leaf `index` in the tree over `leaves`.
///
/// The result is `None` when the index is outside the tree.
pub fn inclusion_proof(leaves: &[Hash], index: u64) -> Option<Vec<Hash>> {
    let index = usize::try_from(index).ok()?;
    if index >= leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    path(index, leaves, &mut proof);
    Some(proof)
}

/// Appends PATH(m, D[n]) from RFC 6962 §2.1.1, deepest node first.
fn path(m: usize, leaves: &[Hash], proof: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split_point(n);
    if m < k {
        path(m, &leaves[..k], proof);
        proof.push(root(&leaves[k..]));
    } else {
        path(m - k, &leaves[k..], proof);
        proof.push(root(&leaves[..k]));
    }
}

/// Shifts `fn_` and `sn` right together until the lowest bit of `fn_` is set
/// or `fn_` reaches zero.
fn shift_while_even(fn_: &mut u64, sn: &mut u64) {
    while *fn_ & 1 == 0 && *fn_ != 0 {
        *fn_ >>= 1;
        *sn >>= 1;
    }
}

/// Verifies an inclusion proof as in RFC 9162 §2.1.3.2.
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let mut fn_ = index;
    let mut sn = size - 1;
    let mut r = *leaf;
    for p in proof {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            shift_while_even(&mut fn_, &mut sn);
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && r == *root
}

/// Returns the consistency proof from the tree of the first `old_size`
/// leaves to the tree over all `leaves`.
///
/// The proof is empty when `old_size` is 0 or equals the current size, and
/// the result is `None` when `old_size` exceeds the current size.
pub fn consistency_proof(leaves: &[Hash], old_size: u64) -> Option<Vec<Hash>> {
    let m = usize::try_from(old_size).ok()?;
    if m > leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    if m != 0 && m != leaves.len() {
        subproof(m, leaves, true, &mut proof);
    }
    Some(proof)
}

/// Appends SUBPROOF(m, D[n], b) from RFC 6962 §2.1.2.
fn subproof(m: usize, leaves: &[Hash], complete: bool, proof: &mut Vec<Hash>) {
    let n = leaves.len();
    if m == n {
        if !complete {
            proof.push(root(leaves));
        }
        return;
    }
    let k = split_point(n);
    if m <= k {
        subproof(m, &leaves[..k], complete, proof);
        proof.push(root(&leaves[k..]));
    } else {
        subproof(m - k, &leaves[k..], false, proof);
        proof.push(root(&leaves[..k]));
    }
}

/// Verifies a consistency proof as in RFC 9162 §2.1.4.2.
///
/// Two cases are decided without a proof, and then the proof must be empty:
/// equal sizes are consistent when the roots are equal, and the empty tree
/// (whose root must be [`empty_root`]) is consistent with every larger tree.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if old_size > new_size {
        return false;
    }
    if old_size == new_size {
        return proof.is_empty() && old_root == new_root;
    }
    if old_size == 0 {
        return proof.is_empty() && *old_root == empty_root();
    }
    let Some((first, rest)) = proof.split_first() else {
        return false;
    };
    // When the old tree is a perfect subtree its root is the implicit first
    // element of the path, so every supplied element is consumed by the loop.
    let (start, path) = if old_size.is_power_of_two() {
        (old_root, proof)
    } else {
        (first, rest)
    };
    let mut fn_ = old_size - 1;
    let mut sn = new_size - 1;
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    let mut fr = *start;
    let mut sr = *start;
    for c in path {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            shift_while_even(&mut fn_, &mut sn);
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && fr == *old_root && sr == *new_root
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaf inputs from transparency-dev/merkle `testonly/constants.go`.
    #[rustfmt::skip]
    const LEAVES: [&str; 8] = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
        "606162636465666768696a6b6c6d6e6f"];

    /// Known hashes from the same file, each the MTH of `LEAVES[lo..hi]`:
    /// the roots for sizes 0..=8 and every perfect subtree.
    #[rustfmt::skip]
    const KNOWN: [(&str, usize, usize); 20] = [
        ("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0, 0),
        ("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", 0, 1),
        ("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125", 0, 2),
        ("aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77", 0, 3),
        ("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7", 0, 4),
        ("4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4", 0, 5),
        ("76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef", 0, 6),
        ("ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c", 0, 7),
        ("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328", 0, 8),
        ("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7", 1, 2),
        ("0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7", 2, 3),
        ("07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7", 3, 4),
        ("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", 4, 5),
        ("4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658", 5, 6),
        ("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f", 6, 7),
        ("46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1", 7, 8),
        ("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e", 2, 4),
        ("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a", 4, 6),
        ("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0", 6, 8),
        ("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4", 4, 8),
    ];

    /// Proof cases from transparency-dev/merkle `proof/verify_test.go` as
    /// (index or old size, size, proof), each proof element being the known
    /// hash of a leaf range.
    type Case = (u64, u64, &'static [(usize, usize)]);
    const INCLUSION: [Case; 4] = [
        (0, 8, &[(1, 2), (2, 4), (4, 8)]),
        (5, 8, &[(4, 5), (6, 8), (0, 4)]),
        (2, 3, &[(0, 2)]),
        (1, 5, &[(0, 1), (2, 4), (4, 5)]),
    ];
    const CONSISTENCY: [Case; 5] = [
        (1, 1, &[]),
        (1, 8, &[(1, 2), (2, 4), (4, 8)]),
        (6, 8, &[(4, 6), (6, 8), (0, 4)]),
        (2, 5, &[(2, 4), (4, 5)]),
        (6, 7, &[(4, 6), (6, 7), (0, 4)]),
    ];

    fn known(lo: usize, hi: usize) -> Hash {
        let (hex_str, ..) = KNOWN
            .iter()
            .find(|k| (k.1, k.2) == (lo, hi))
            .expect("every referenced range is in the table");
        hex::decode(hex_str)
            .expect("test vector is hex")
            .try_into()
            .expect("test vector is 32 bytes")
    }

    fn known_proof(ranges: &[(usize, usize)]) -> Vec<Hash> {
        ranges.iter().map(|&(lo, hi)| known(lo, hi)).collect()
    }

    fn vector_leaves() -> Vec<Hash> {
        let entry = |e: &&str| hex::decode(e).expect("test vector is hex");
        LEAVES.iter().map(|e| leaf_hash(&entry(e))).collect()
    }

    fn synthetic_leaves(n: usize) -> Vec<Hash> {
        (0..n as u32).map(|i| leaf_hash(&i.to_be_bytes())).collect()
    }

    #[test]
    fn known_vectors() {
        let leaves = vector_leaves();
        assert_eq!(empty_root(), known(0, 0));
        for (_, lo, hi) in KNOWN {
            assert_eq!(root(&leaves[lo..hi]), known(lo, hi), "range {lo}..{hi}");
        }
        for (index, size, ranges) in INCLUSION {
            let (want, tree) = (known_proof(ranges), &leaves[..size as usize]);
            assert_eq!(inclusion_proof(tree, index), Some(want.clone()));
            let leaf = &leaves[index as usize];
            assert!(verify_inclusion(leaf, index, size, &want, &root(tree)));
        }
        for (old, new, ranges) in CONSISTENCY {
            let want = known_proof(ranges);
            let (old_root, new_root) = (known(0, old as usize), known(0, new as usize));
            assert_eq!(
                consistency_proof(&leaves[..new as usize], old),
                Some(want.clone())
            );
            assert!(verify_consistency(old, new, &old_root, &new_root, &want));
        }
        assert_eq!(inclusion_proof(&leaves[..1], 0), Some(vec![]));
        assert_eq!(inclusion_proof(&leaves, 8), None);
        assert_eq!(inclusion_proof(&[], 0), None);
        assert_eq!(consistency_proof(&leaves[..3], 4), None);
        assert_eq!(consistency_proof(&leaves, 0), Some(vec![]));
    }

    #[test]
    fn root_builder_matches_root() {
        let leaves = synthetic_leaves(300);
        let mut builder = RootBuilder::new();
        for size in 0..=300 {
            assert_eq!(builder.size(), size as u64);
            assert_eq!(builder.root(), root(&leaves[..size]), "size {size}");
            if size < 300 {
                builder.push(leaves[size]);
            }
        }
    }

    /// Returns copies of `proof` with one byte flipped. Small trees get every
    /// byte of every element flipped; larger ones get the first, a middle and
    /// the last byte of every element, which keeps debug test runs short.
    fn flipped(proof: &[Hash], size: usize) -> Vec<Vec<Hash>> {
        let bytes: Vec<usize> = if size <= 16 {
            (0..32).collect()
        } else {
            vec![0, 15, 31]
        };
        let mut out = Vec::new();
        for element in 0..proof.len() {
            for &byte in &bytes {
                let mut bad = proof.to_vec();
                bad[element][byte] ^= 0x01;
                out.push(bad);
            }
        }
        out
    }

    #[test]
    fn inclusion_proofs_verify_and_tampering_fails() {
        let leaves = synthetic_leaves(64);
        let other = leaf_hash(b"not in the tree");
        for size in 1..=64usize {
            let (tree, n) = (&leaves[..size], size as u64);
            let r = root(tree);
            for i in 0..n {
                let leaf = &leaves[i as usize];
                let proof = inclusion_proof(tree, i).expect("index is inside the tree");
                assert!(verify_inclusion(leaf, i, n, &proof, &r), "{i}/{n}");
                for bad in flipped(&proof, size) {
                    assert!(!verify_inclusion(leaf, i, n, &bad, &r));
                }
                for j in [i.wrapping_sub(1), i + 1, i ^ 2, n] {
                    assert!(!verify_inclusion(leaf, j, n, &proof, &r), "index {j}");
                }
                // A different size is checked against that size's own root,
                // since a (size, root) pair is what a checkpoint signs.
                for m in [n - 1, n + 1] {
                    if i < m && m <= 64 {
                        let other_root = root(&leaves[..m as usize]);
                        assert!(!verify_inclusion(leaf, i, m, &proof, &other_root));
                    }
                }
                assert!(!verify_inclusion(leaf, i, n * 2, &proof, &r));
                assert!(!verify_inclusion(&other, i, n, &proof, &r));
                assert!(!verify_inclusion(leaf, i, n, &proof, &other));
                let mut longer = proof.clone();
                longer.push(r);
                assert!(!verify_inclusion(leaf, i, n, &longer, &r));
                if let Some((_, shorter)) = proof.split_last() {
                    assert!(!verify_inclusion(leaf, i, n, shorter, &r));
                }
            }
        }
    }

    #[test]
    fn consistency_proofs_verify_and_tampering_fails() {
        let leaves = synthetic_leaves(64);
        let other = leaf_hash(b"not a root");
        let check = verify_consistency;
        for size in 1..=64usize {
            let (n, new_root) = (size as u64, root(&leaves[..size]));
            for m in 0..=n {
                let old_root = root(&leaves[..m as usize]);
                let proof = consistency_proof(&leaves[..size], m).expect("old size fits");
                assert!(check(m, n, &old_root, &new_root, &proof), "{m}->{n}");
                for bad in flipped(&proof, size) {
                    assert!(!check(m, n, &old_root, &new_root, &bad));
                }
                for wrong in [m.wrapping_sub(1), m + 1] {
                    assert!(
                        !check(wrong, n, &old_root, &new_root, &proof),
                        "{m}/{wrong}"
                    );
                }
                assert!(!check(m, n, &other, &new_root, &proof));
                // The empty tree is consistent with every tree, so only a
                // non-empty old tree pins the new size and the new root. A
                // different new size is checked against that size's own root.
                if m != 0 {
                    for wrong in [n - 1, n + 1] {
                        if wrong >= m && wrong <= 64 {
                            let wrong_root = root(&leaves[..wrong as usize]);
                            assert!(!check(m, wrong, &old_root, &wrong_root, &proof));
                        }
                    }
                    assert!(!check(m, n * 2, &old_root, &new_root, &proof));
                    assert!(!check(m, n, &old_root, &other, &proof));
                }
                let mut longer = proof.clone();
                longer.push(new_root);
                assert!(!check(m, n, &old_root, &new_root, &longer));
                if let Some((_, shorter)) = proof.split_last() {
                    assert!(!check(m, n, &old_root, &new_root, shorter));
                }
            }
        }
    }
}
