//! Which variables a query uses: one flag per variable, shared rather than copied.
//!
//! A recorded shape's densities are the same for every partition proved on it, and a 32 GiB
//! PoRep partition has two of 130 M flags each. Each partition's witness used to take its own
//! copy of them and count their set flags several times over, on the device worker's thread
//! while the device waited. A [`Density`] is a reference to the flags and to their count,
//! made once.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

/// Flags of one query over a circuit's variables, cheap to clone (the clones share the flags
/// and the count of set ones).
#[derive(Clone, Default)]
pub struct Density(Arc<Inner>);

#[derive(Default)]
struct Inner {
    flags: Vec<bool>,
    set: OnceLock<usize>,
}

impl Density {
    /// The flags, counted when first asked.
    pub fn new(flags: Vec<bool>) -> Self {
        Density(Arc::new(Inner {
            flags,
            set: OnceLock::new(),
        }))
    }

    /// The flags.
    pub fn flags(&self) -> &[bool] {
        &self.0.flags
    }

    /// How many flags are set: counted once (in parallel, on the current rayon pool), then
    /// remembered by every clone.
    pub fn count(&self) -> usize {
        *self.0.set.get_or_init(|| {
            self.0
                .flags
                .par_chunks(1 << 16)
                .map(|c| c.iter().filter(|&&d| d).count())
                .sum()
        })
    }

    /// Host bytes of the flags (shared by every clone).
    pub fn host_bytes(&self) -> usize {
        self.0.flags.capacity()
    }

    /// The flags as a vector of their own (a copy where they are shared).
    pub fn into_vec(self) -> Vec<bool> {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => inner.flags,
            Err(shared) => shared.flags.clone(),
        }
    }
}

impl Deref for Density {
    type Target = [bool];
    fn deref(&self) -> &[bool] {
        &self.0.flags
    }
}

impl From<Vec<bool>> for Density {
    fn from(flags: Vec<bool>) -> Self {
        Density::new(flags)
    }
}

impl PartialEq for Density {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.flags == other.0.flags
    }
}

impl std::fmt::Debug for Density {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Density")
            .field("len", &self.0.flags.len())
            .field("set", &self.0.set.get())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flags_and_the_count() {
        let flags: Vec<bool> = (0..200_000).map(|i| i % 3 == 0).collect();
        let d = Density::new(flags.clone());
        let e = d.clone();
        assert_eq!(d.count(), 66_667);
        assert_eq!(
            e.0.set.get(),
            Some(&66_667),
            "the clone sees the count made once"
        );
        assert!(std::ptr::eq(d.flags().as_ptr(), e.flags().as_ptr()));
        assert_eq!(&*d, &flags[..]);
        assert_eq!(d, Density::new(flags.clone()), "equal by value too");
        drop(d);
        assert_eq!(e.into_vec(), flags, "the last holder gets the vector back");
    }

    #[test]
    fn empty_and_all_set() {
        assert_eq!(Density::default().count(), 0);
        assert_eq!(Density::new(vec![true; 70_000]).count(), 70_000);
        assert_ne!(Density::new(vec![true]), Density::new(vec![false]));
    }
}
